import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBuiltinPath } from '../../src/catalogue/load.js';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { applySchema } from '../../src/coordination/topology.js';
import { buildShimApp } from '../../src/shim/app.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';
import { openGaugeFixture, otlpPoint, type GaugeFixture } from '../helpers/gauge-fixture.js';
import { capturingLogger } from '../helpers/logger.js';

/**
 * issue 28 part 1: an override ConfigMap written for the original (its keys only: database,
 * sql, params, binds, result_field, clamps, cold_hold, timeout_seconds) that replaces the SQL
 * of every built-in query loads over the shipped queries/queries.yaml and is served by the
 * real engine. The built-in parts tied to the old SQL (pressure's batch form) go with it, and
 * the start log says so once.
 */
const OVERRIDES: Readonly<Record<string, string>> = {
  // The original's due count, its own SQL over the coordination tables; a named result column.
  backlog: `
  backlog:
    sql: "SELECT 7 AS ignored, count() AS due FROM __DB__.hunt_schedule"
    result_field: due
    timeout_seconds: 3`,
  // The shape: {service:String} and {window_seconds:UInt32}, the bind left to the built-in.
  pressure: `
  pressure:
    sql: |
      SELECT ifNull(max(Value), 0) AS pressure FROM __DB__.otel_metrics_gauge
      WHERE ServiceName = {service:String} AND MetricName = 'queue_fill'
        AND TimeUnix >= now64(9) - toIntervalSecond({window_seconds:UInt32})
    clamp_max: 90`,
};

const dir = mkdtempSync(join(tmpdir(), 'dfe-original-override-'));
const overridePath = join(dir, 'override.yaml');
const { logger, lines } = capturingLogger();
let fx: GaugeFixture;
let store: CatalogueStore;
let app: FastifyInstance;

beforeAll(async () => {
  fx = await openGaugeFixture('original_override');
  await applySchema(fx.db.handle.client, fx.db.database, { kind: 'single' });
  const now = await fx.engineNowNs();
  await fx.write([
    otlpPoint('svc-a', 'pod-1', 'queue_fill', 40, now),
    otlpPoint('svc-b', 'pod-1', 'queue_fill', 95, now),
  ]);
  writeFileSync(overridePath, `queries:${Object.values(OVERRIDES).join('')}\n`);
  store = await CatalogueStore.open({
    overridePath,
    dataDatabase: fx.db.database,
    otelDatabase: fx.db.database,
    builtins: SHIM_CATALOGUE_BUILTINS,
    clock: new ManualClock(0),
  });
  app = await buildShimApp({ catalogue: store, clickhouse: fx.db.handle, config: loadConfig({}), registry: new Registry(), logger });
});
afterAll(async () => {
  await app?.close();
  store?.stop();
  await fx?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function answer(url: string): Promise<{ status: number; value: unknown }> {
  const res = await app.inject({ method: 'GET', url });
  return { status: res.statusCode, value: (res.json() as { value?: unknown }).value };
}

describe("an override in the original's format over every built-in query", () => {
  it('covers each query of the shipped built-in catalogue', () => {
    const shipped = parse(readFileSync(defaultBuiltinPath(), 'utf8')) as { queries: Record<string, unknown> };
    expect(Object.keys(OVERRIDES).sort()).toEqual(Object.keys(shipped.queries).sort());
  });

  it('backlog: the new SQL and its result_field serve from the real engine', async () => {
    expect(await answer('/keda/hunt-backlog')).toEqual({ status: 200, value: 0 });
    expect(store.current().queries.get('backlog')?.timeoutSeconds).toBe(3);
  });

  it('pressure: runs one by one with the built-in bind, params and metric type; the override clamp applies', async () => {
    const q = store.current().queries.get('pressure')!;
    expect({ batch: q.batch, binds: q.binds, params: q.params, metricType: q.metricType }).toEqual({
      batch: undefined,
      binds: { window_seconds: 60 },
      params: ['service'],
      metricType: 'Value',
    });
    // Concurrent keys, each its own query now: each gets its own answer.
    const [a, b, none] = await Promise.all([answer('/keda/pressure?service=svc-a'), answer('/keda/pressure?service=svc-b'), answer('/keda/pressure?service=svc-x')]);
    expect([a, b, none]).toEqual([
      { status: 200, value: 40 },
      { status: 200, value: 90 },
      { status: 200, value: 0 },
    ]);
  });

  it('the start log names the dropped built-in parts once, and why', () => {
    const warnings = lines.filter((l) => l['level'] === 40 && l['query'] === 'pressure');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!['file']).toBe(overridePath);
    expect(warnings[0]!['value']).toEqual(['batch']);
    expect(String(warnings[0]!['msg'])).toMatch(/replaces the SQL, so the built-in parts that belonged to the old SQL were dropped: batch \(set by .*queries\.yaml\); without a batch form/);
    expect(lines.filter((l) => l['level'] === 40 && l['query'] === 'backlog')).toEqual([]);
  });
});
