import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { Coordinator } from '../../../src/coordination/coordinator.js';
import { materialise } from '../../../src/coordination/materialise.js';
import { applySchema, coordinationSettings } from '../../../src/coordination/topology.js';
import { latestFire } from '../../../src/schedule/arithmetic.js';
import { compileHuntFile, type HuntSpec } from '../../../src/schedule/hunt-spec.js';
import { silentLogger } from '../../../src/log.js';
import { startShim, type RunningShim } from '../../../src/shim/start.js';
import { embeddedPathForThisProcess, openTestDatabase, queryRows, type TestDatabase } from '../../helpers/clickhouse.js';
import { freePort } from '../../helpers/ports.js';
import { scalerClient, until, type ScalerClient } from '../../helpers/grpc-client.js';

/**
 * The whole way, as KEDA's external-push trigger sees it: the shim started as
 * production starts it (startShim, the built-in catalogue's `backlog`, gRPC on
 * DFE_KEDA_SHIM_GRPC_PORT), a stream on `query: backlog`, a run-now request
 * written as `dfe-hunt-runner run-now` writes it, and the stream turning true;
 * closing the shim ends the stream with OK (KEDA reconnects).
 */
const SETTINGS = coordinationSettings({ kind: 'single' });
let db: TestDatabase;
let shim: RunningShim;
let client: ScalerClient;

function spec(id: string): HuntSpec {
  // A daily hunt: its next scheduled fire does not come due during the test.
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: 86400}\nqueries: [SELECT 1]\n`, 0.8);
  if (result.kind !== 'hunt') throw new Error('fixture');
  return result.spec;
}

beforeAll(async () => {
  db = await openTestDatabase('grpc_run_now');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  const hunt = spec('nightly');
  await materialise(db.handle.client, db.database, [hunt], SETTINGS);
  const [{ now } = { now: 0 }] = await queryRows<{ now: number }>(db, 'SELECT toInt64(toUnixTimestamp(now())) AS now');
  await new Coordinator(db.handle.client, db.database, SETTINGS).setWatermark('nightly', latestFire(Number(now), 86400, hunt.phaseOffset));
  const config = loadConfig({
    ...process.env,
    DFE_EMBEDDED_PATH: embeddedPathForThisProcess(),
    DFE_CLICKHOUSE_DATA_DATABASE: db.database,
    DFE_KEDA_SHIM_HOST: '127.0.0.1',
    DFE_KEDA_SHIM_PORT: String(await freePort()),
    DFE_KEDA_SHIM_GRPC_PORT: String(await freePort()),
    DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS: '250',
  });
  shim = await startShim({ config, clickhouse: db.handle, logger: silentLogger() });
  client = scalerClient(shim.grpc?.address ?? 'missing');
});
afterAll(async () => {
  client?.close();
  await shim?.close();
  await db?.close();
});

describe('run-now → StreamIsActive', () => {
  it('turns the stream true, with one message per change', async () => {
    expect(shim.grpc).toBeDefined();
    const stream = client.streamIsActive({ query: 'backlog', scalerAddress: 'dfe-keda-shim:9090' });
    await until(() => stream.messages.length === 1, 'the first state');
    expect(stream.messages).toEqual([false]);
    expect(await client.getMetrics({ query: 'backlog' })).toMatchObject({ metricValues: [{ metricValueFloat: 0 }] });

    await new Coordinator(db.handle.client, db.database, SETTINGS).requestRun('nightly');
    await until(() => stream.messages.length === 2, 'the stream to turn true');
    expect(stream.messages).toEqual([false, true]);
    expect(await client.getMetrics({ query: 'backlog' })).toMatchObject({ metricValues: [{ metricValueFloat: 1 }] });

    await shim.close();
    await until(() => stream.ended !== undefined, 'the stream to end');
    expect(stream.ended?.code).toBe(status.OK);
  });
});
