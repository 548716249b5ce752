import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { systemClock } from '../../src/clock.js';
import { applySchema } from '../../src/coordination/topology.js';
import { createOtelGaugeTable, insertGaugePoints } from '../../src/pressure/otel-table.js';
import { PRESSURE_METRIC } from '../../src/pressure/rule.js';
import { buildShimApp } from '../../src/shim/app.js';
import type { FastifyInstance } from 'fastify';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { get, shimConfig } from '../helpers/shim.js';
import { SHIM_CATALOGUE_BUILTINS, shimCatalogueBuiltins } from '../../src/shim/catalogue-builtins.js';

/**
 * The shipped catalogue (queries/queries.yaml, loaded by the real store) served
 * through the shim against the real engine: KEDA's two paths end to end.
 */
let db: TestDatabase;
let app: FastifyInstance;

beforeAll(async () => {
  db = await openTestDatabase('shim_builtin');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOtelGaugeTable(db.handle.client, db.database);
  const catalogue = await CatalogueStore.open({ dataDatabase: db.database, otelDatabase: db.database, builtins: SHIM_CATALOGUE_BUILTINS, clock: systemClock });
  app = await buildShimApp({ catalogue, clickhouse: db.handle, config: { shim: shimConfig() }, registry: new Registry() });
});
afterAll(async () => {
  await app?.close();
  await db?.close();
});

describe('built-in queries', () => {
  it('/keda/hunt-backlog counts due hunts with the shared due SQL', async () => {
    expect((await get(app, '/keda/hunt-backlog')).body).toEqual({ value: 0, source: 'fresh', age_seconds: 0 });
    await db.handle.client.insert({
      table: `${db.database}.hunt_schedule`,
      values: [
        { hunt_id: 'h1', interval_seconds: 60, phase_offset: 0 },
        { hunt_id: 'h2', interval_seconds: 300, phase_offset: 7 },
      ],
      format: 'JSONEachRow',
    });
    expect((await get(app, '/keda/hunt-backlog')).body).toEqual({ value: 2, source: 'fresh', age_seconds: 0 });
  });

  it('/keda/pressure reads the service gauge; the service param is required', async () => {
    const nowNs = BigInt(Date.now()) * 1_000_000n;
    await insertGaugePoints(db.handle.client, db.database, [
      { serviceName: 'checkout', metricName: PRESSURE_METRIC, value: 42.25, timeUnixNs: nowNs },
      { serviceName: 'other', metricName: PRESSURE_METRIC, value: 99, timeUnixNs: nowNs },
    ]);
    expect((await get(app, '/keda/pressure?service=checkout&hold=70')).body).toEqual({ value: 42.25, source: 'fresh', age_seconds: 0 });
    expect((await get(app, '/keda/pressure?service=nobody&hold=70')).body).toEqual({ value: 0, source: 'fresh', age_seconds: 0 });
    expect((await get(app, '/keda/pressure?hold=70')).status).toBe(400);
  });
});

describe('built-in backlog with DFE_BACKLOG_REFRESH_SECONDS on', () => {
  it('/keda/hunt-backlog answers the server-refreshed count while it is fresh (docs/tables.md#the-server-refreshed-count)', async () => {
    const catalogue = await CatalogueStore.open({
      dataDatabase: db.database,
      otelDatabase: db.database,
      builtins: shimCatalogueBuiltins(10),
      clock: systemClock,
    });
    const refreshed = await buildShimApp({ catalogue, clickhouse: db.handle, config: { shim: shimConfig() }, registry: new Registry() });
    try {
      // No count yet: the due count answers (the two hunts of the test above).
      expect((await get(refreshed, '/keda/hunt-backlog')).body).toEqual({ value: 2, source: 'fresh', age_seconds: 0 });
      await db.handle.client.command({ query: `INSERT INTO \`${db.database}\`.hunt_backlog VALUES (now64(3), 4242)` });
      expect((await get(refreshed, '/keda/hunt-backlog')).body).toEqual({ value: 4242, source: 'fresh', age_seconds: 0 });
      // The shim with the refresh off still asks the due count.
      expect((await get(app, '/keda/hunt-backlog')).body).toEqual({ value: 2, source: 'fresh', age_seconds: 0 });
    } finally {
      await refreshed.close();
    }
  });
});
