import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { systemClock } from '../../src/clock.js';
import { createOtelGaugeTable, insertGaugePoints } from '../../src/pressure/otel-table.js';
import { PRESSURE_METRIC } from '../../src/pressure/rule.js';
import { buildShimApp } from '../../src/shim/app.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { get, shimConfig } from '../helpers/shim.js';

/**
 * Issue 18's reproduction: N concurrent polls of the pressure trigger, each for
 * a different service, against a healthy engine (the real embedded one, the
 * shipped catalogue). Before, past 32 in flight the rest were answered from the
 * fail-safe path at once (`overload`); now every one is fresh and nothing is shed.
 */
let db: TestDatabase;
let app: FastifyInstance;
let registry: Registry;
let dir: string;

beforeAll(async () => {
  db = await openTestDatabase('shim_burst');
  await createOtelGaugeTable(db.handle.client, db.database);
  const nowNs = BigInt(Date.now()) * 1_000_000n;
  // Every third service has a reading (i % 100), the others none (a fresh 0).
  const points = Array.from({ length: 300 }, (_, i) => i)
    .filter((i) => i % 3 === 0)
    .map((i) => ({ serviceName: `svc-${i}`, metricName: PRESSURE_METRIC, value: i % 100, timeUnixNs: nowNs }));
  await insertGaugePoints(db.handle.client, db.database, points);
  // The shipped catalogue with a deadline no load on this machine reaches: before, the shedding
  // happened at once whatever the deadline; what is under test is that nothing is shed.
  dir = mkdtempSync(join(tmpdir(), 'dfe-burst-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, 'queries:\n  pressure:\n    deadline_ms: 60000\n    timeout_seconds: 120\n');
  const catalogue = await CatalogueStore.open({ dataDatabase: db.database, otelDatabase: db.database, overridePath, builtins: SHIM_CATALOGUE_BUILTINS, clock: systemClock });
  registry = new Registry();
  app = await buildShimApp({ catalogue, clickhouse: db.handle, config: { shim: shimConfig() }, registry });
});
afterAll(async () => {
  await app?.close();
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function overloadCount(): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const line = text.split('\n').find((l) => l.startsWith('dfe_keda_shim_failsafe_answers_total{query="pressure",reason="overload"}'));
  if (line === undefined) throw new Error('the overload series of pressure is missing from /metrics');
  return Number(line.split(' ').pop());
}

describe.each([100, 300])('%i concurrent distinct pressure polls, healthy engine', (n) => {
  it('all answer fresh with their own value; the overload counter stays 0', async () => {
    const started = app.shim.executor.queriesStarted;
    // A fresh set of services per run (the cache would answer a repeat).
    const offset = n === 100 ? 0 : 100;
    const ids = Array.from({ length: n }, (_, i) => (i + offset) % 300);
    const answers = await Promise.all(ids.map((i) => get(app, `/keda/pressure?service=svc-${i}&hold=70&run=${n}`)));
    const notFresh = answers.filter((a) => a.status !== 200 || a.body.source !== 'fresh');
    expect(notFresh).toEqual([]);
    expect(answers.map((a) => a.body.value)).toEqual(ids.map((i) => (i % 3 === 0 ? i % 100 : 0)));
    expect(await overloadCount()).toBe(0);
    // Batched: far fewer ClickHouse queries than services.
    expect(app.shim.executor.queriesStarted - started).toBeLessThan(n);
  });
});
