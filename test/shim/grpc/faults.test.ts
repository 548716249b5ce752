import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningGrpc } from '../../../src/shim/grpc/server.js';
import { openTestDatabase, type TestDatabase } from '../../helpers/clickhouse.js';
import { blackHoleServer, refusedPort, swappableServerHandle, type FaultEndpoint, type SwappableHandle } from '../../helpers/faults.js';
import { compiled, get, type AppUnderTest } from '../../helpers/shim.js';
import { until, type ScalerClient } from '../../helpers/grpc-client.js';
import { startGrpcUnderTest, type GrpcUnderTest } from '../../helpers/grpc.js';

/**
 * The fail-safe answers over gRPC, through REAL sockets: the handle's client is
 * switched from the real engine to a loopback listener that accepts and never
 * answers (hung) and to a refused port (broken), as if ClickHouse went away.
 * GetMetrics and IsActive answer from the fail-safe path by the deadline, as
 * HTTP does; GetMetricSpec does not notice; an open stream stays quiet (no
 * message, no error) and speaks again when a fresh value changes its state.
 * Asserts values and events, never timings.
 */
let db: TestDatabase;
let hung: FaultEndpoint;
let broken: FaultEndpoint;
let hangingClient: ClickHouseClient;
let refusedClient: ClickHouseClient;
let swap: SwappableHandle;
let t: AppUnderTest;
let grpc: RunningGrpc;
let client: ScalerClient;
let g: GrpcUnderTest;

beforeAll(async () => {
  db = await openTestDatabase('grpc_faults');
  await db.handle.client.command({ query: `CREATE TABLE \`${db.database}\`.backlog (n UInt32) ENGINE = Memory` });
  hung = await blackHoleServer();
  broken = await refusedPort();
  hangingClient = createClient({ url: hung.url, request_timeout: 30_000, log: { level: ClickHouseLogLevel.OFF } });
  refusedClient = createClient({ url: broken.url, log: { level: ClickHouseLogLevel.OFF } });
  swap = swappableServerHandle(db.handle.client);
  const clickhouse = swap.handle;
  const deadline = { deadlineMs: 1_000, timeoutSeconds: 2 };
  const queries = [
    compiled('count', 'SELECT count() FROM numbers({n:UInt32})', { params: ['n'], coldHold: 4, ...deadline }),
    compiled('pressure', 'SELECT 80 + length({service:String}) * 0', { params: ['service'], metricType: 'Value', ...deadline }),
    compiled('work', `SELECT count() FROM \`${db.database}\`.backlog`, deadline),
  ];
  g = await startGrpcUnderTest({ queries, clickhouse });
  ({ t, grpc, client } = g);
});
afterAll(async () => {
  await g?.close();
  await hangingClient?.close();
  await refusedClient?.close();
  await hung?.close();
  await broken?.close();
  await db?.close();
});

const metricsText = async () => (await get(t.app, '/metrics')).body.text as string;

async function counter(pattern: RegExp): Promise<number> {
  const match = pattern.exec(await metricsText());
  return match ? Number(match[1]) : 0;
}

for (const [kind, pick, reason] of [
  ['hung (accepts, never answers)', () => hangingClient, 'deadline'],
  ['broken (connection refused)', () => refusedClient, 'error'],
] as const) {
  describe(`a ${kind} ClickHouse`, () => {
    it('GetMetrics and IsActive answer last_good on a warm key, cold_hold on a cold one, hold for a Value query', async () => {
      swap.use(db.handle.client);
      expect((await client.getMetrics({ query: 'count', n: '12' })).metricValues[0]?.metricValueFloat).toBe(12);
      expect((await client.getMetrics({ query: 'pressure', service: 'a' })).metricValues[0]?.metricValueFloat).toBe(80);
      swap.use(pick());
      expect((await client.getMetrics({ query: 'count', n: '12' })).metricValues[0]?.metricValueFloat).toBe(12);
      expect((await client.getMetrics({ query: 'count', n: '99' })).metricValues[0]?.metricValueFloat).toBe(4);
      expect((await client.getMetrics({ query: 'pressure', service: 'a', hold: '70' })).metricValues[0]?.metricValueFloat).toBe(70);
      expect(await client.isActive({ query: 'count', n: '12', activationTargetValue: '11' })).toEqual({ result: true });
      expect(await client.getMetricSpec({ query: 'count', n: '12', targetValue: '3' })).toMatchObject({ metricSpecs: [{ targetSizeFloat: 3 }] });
      // Answered by the fail-safe path for that reason (hung: at deadline_ms, not at the query's timeout).
      expect(await metricsText()).toMatch(new RegExp(`failsafe_answers_total\\{query="count",reason="${reason}"\\} [1-9]`));
      swap.use(db.handle.client);
    });
  });
}

describe('a StreamIsActive stream through an outage', () => {
  it('sends its state, stays quiet (no message, no error) while ClickHouse fails, and sends the change after', async () => {
    swap.use(db.handle.client);
    const stream = client.streamIsActive({ query: 'work' });
    await until(() => stream.messages.length === 1, 'the first state');
    expect(stream.messages).toEqual([false]);

    const held = /dfe_keda_shim_grpc_stream_checks_total\{outcome="held"\} (\d+)/;
    for (const outage of [hangingClient, refusedClient]) {
      const before = await counter(held);
      swap.use(outage);
      // Several checks fail (the hung ones only by the deadline); the stream neither hears nor ends.
      await until(async () => (await counter(held)) >= before + 3, 'three held checks', 60_000);
      expect(stream.messages).toEqual([false]);
      expect(stream.ended).toBeUndefined();
    }
    swap.use(db.handle.client);
    await db.handle.client.command({ query: `INSERT INTO \`${db.database}\`.backlog VALUES (1)` });
    await until(() => stream.messages.length === 2, 'the change');
    expect(stream.messages).toEqual([false, true]);
    expect(stream.ended).toBeUndefined();
    stream.cancel();
    await until(() => grpc.streams.size === 0, 'the stream to be freed');
  });
});
