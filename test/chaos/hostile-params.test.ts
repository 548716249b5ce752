import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { systemClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { buildShimApp } from '../../src/shim/app.js';
import { PARAM_VALUE } from '../../src/shim/params.js';
import { http500Server, type FaultEndpoint } from '../helpers/faults.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

/**
 * Hostile query strings through the real routes (`app.inject`), with the
 * production catalogue loader and a production-configured ClickHouse client
 * pointed at a counting HTTP 500 listener: every request that reaches
 * "ClickHouse" is counted on its socket. Every bad value must be a 400 with a
 * clear error, and must not reach it; nothing may crash the route (no 500).
 */
const NUM_RUNS = 150;

let dir: string;
let sink: FaultEndpoint;
let clickhouse: ClickHouseHandle;
let catalogue: CatalogueStore;
let app: FastifyInstance;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dfe-hostile-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(
    overridePath,
    `queries:
  two:
    database: data
    params: [service, region]
    sql: "SELECT count() AS value FROM system.one WHERE {service:String} != {region:String}"
    deadline_ms: 500
    timeout_seconds: 1
    cold_hold: 7
`,
  );
  sink = await http500Server();
  const config = loadConfig({ DFE_CLICKHOUSE_URL: sink.url, DFE_KEDA_SHIM_QUERY_CONFIG: overridePath, LOG_LEVEL: 'silent' });
  clickhouse = await openClickHouse(config.clickhouse);
  catalogue = await CatalogueStore.open({
    overridePath,
    dataDatabase: config.clickhouse.dataDatabase,
    otelDatabase: config.clickhouse.otelDatabase,
    builtins: SHIM_CATALOGUE_BUILTINS,
    clock: systemClock,
  });
  app = await buildShimApp({ catalogue, clickhouse, config, registry: new Registry() });
});

afterAll(async () => {
  await app?.close();
  await clickhouse?.close();
  await sink?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function get(url: string) {
  const res = await app.inject({ method: 'GET', url });
  let body: Record<string, unknown>;
  try {
    body = res.json();
  } catch {
    body = { unparsable: res.body };
  }
  return { status: res.statusCode, body };
}

const badValue = fc
  .oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.constantFrom('', ' ', "x' OR 1=1 --", 'a b', 'a/b', '%', '{service:String}', '\u0000', 'é', 'a'.repeat(254), 'x;DROP TABLE t'),
    fc.string({ minLength: 254, maxLength: 400, unit: fc.constantFrom('a', 'b', '1', '-') }),
  )
  .filter((v) => !PARAM_VALUE.test(v));

const goodValue = fc.stringMatching(/^[A-Za-z0-9_.:-]{1,30}$/);

describe('hostile query parameters', () => {
  it('a bad declared param value is a 400 naming the param, and never reaches ClickHouse', async () => {
    await fc.assert(
      fc.asyncProperty(badValue, goodValue, fc.boolean(), async (bad, ok, badIsService) => {
        const hitsBefore = sink.hits();
        const [service, region] = badIsService ? [bad, ok] : [ok, bad];
        const res = await get(`/q/two?service=${encodeURIComponent(service)}&region=${encodeURIComponent(region)}`);
        expect(res.status).toBe(400);
        expect(res.body.query).toBe('two');
        expect(String(res.body.error)).toContain(badIsService ? 'service' : 'region');
        expect(sink.hits()).toBe(hitsBefore);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('a missing or repeated param is a 400 and never reaches ClickHouse', async () => {
    await fc.assert(
      fc.asyncProperty(goodValue, goodValue, fc.constantFrom('missing', 'repeated', 'empty-name'), async (a, b, shape) => {
        const hitsBefore = sink.hits();
        const qs = {
          missing: `service=${a}`,
          repeated: `service=${a}&service=${b}&region=${b}`,
          'empty-name': `=${a}&region=${b}`,
        }[shape];
        const res = await get(`/q/two?${qs}`);
        expect(res.status).toBe(400);
        expect(typeof res.body.error).toBe('string');
        expect(sink.hits()).toBe(hitsBefore);
      }),
      { numRuns: 60 },
    );
  });

  it('a bad hold target is a 400 and never reaches ClickHouse', async () => {
    const badHold = fc.oneof(
      fc.string({ maxLength: 12 }).filter((h) => !/^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(h)),
      fc.constantFrom('-1', 'Infinity', 'NaN', '1e999', '0x10', '+5', '70,5'),
    );
    await fc.assert(
      fc.asyncProperty(goodValue, badHold, async (service, hold) => {
        const hitsBefore = sink.hits();
        const res = await get(`/keda/pressure?service=${service}&hold=${encodeURIComponent(hold)}`);
        expect(res.status).toBe(400);
        expect(String(res.body.error)).toContain('hold');
        expect(sink.hits()).toBe(hitsBefore);
      }),
      { numRuns: 80 },
    );
  });

  it('an unknown query name is a 404 and never reaches ClickHouse', async () => {
    const known = new Set(catalogue.current().queries.keys());
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 60 }), async (name) => {
        fc.pre(!known.has(name));
        const hitsBefore = sink.hits();
        const res = await get(`/q/${encodeURIComponent(name)}?service=a&region=b`);
        expect(res.status).toBe(404);
        expect(typeof res.body.error).toBe('string');
        expect(sink.hits()).toBe(hitsBefore);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('any raw query string: a 200 fail-safe answer or a 4xx with an error, never a 5xx', async () => {
    const rawQuery = fc.oneof(fc.string({ unit: 'grapheme-ascii', maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 40 }).map(encodeURI));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/q/two', '/keda/pressure', '/keda/hunt-backlog'), rawQuery, async (path, qs) => {
        const res = await get(`${path}?${qs}`);
        expect(res.status).toBeLessThan(500);
        if (res.status === 200) expect(typeof res.body.value).toBe('number');
        else expect(typeof res.body.error).toBe('string');
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('a valid request does reach ClickHouse (the counter counts) and gets the fail-safe 200', async () => {
    const hitsBefore = sink.hits();
    const res = await get('/q/two?service=checkout&region=eu-west-1');
    expect(res).toEqual({ status: 200, body: { value: 7, source: 'cold_hold', age_seconds: 0 } });
    expect(sink.hits()).toBe(hitsBefore + 1);
  });
});
