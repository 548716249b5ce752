import { createServer, type Server, type Socket } from 'node:net';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';
import { swappableServerHandle, type SwappableHandle } from '../helpers/faults.js';

/**
 * Deadline and failure behaviour through REAL sockets: a server-backend client
 * pointed at a loopback listener that accepts and never answers, and at a
 * refused port. The good value before the outage comes from the real engine:
 * the handle's client is switched mid-test, as if ClickHouse went away.
 * Asserts sources and values, never timings.
 */
let db: TestDatabase;
let blackhole: Server;
const held: Socket[] = [];
let hangingClient: ClickHouseClient;
let refusedClient: ClickHouseClient;
let t: AppUnderTest;
const clock = new ManualClock(5_000_000);
let swap: SwappableHandle;

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

beforeAll(async () => {
  db = await openTestDatabase('shim_sockets');
  blackhole = createServer((socket) => held.push(socket));
  const hangingPort = await listen(blackhole);
  const probe = createServer();
  const refusedPort = await listen(probe);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  hangingClient = createClient({ url: `http://127.0.0.1:${hangingPort}`, request_timeout: 30_000 });
  refusedClient = createClient({ url: `http://127.0.0.1:${refusedPort}` });
  swap = swappableServerHandle(db.handle.client);
  const clickhouse = swap.handle;
  const queries = [
    compiled('count', 'SELECT count() FROM numbers({n:UInt32})', { params: ['n'], deadlineMs: 1_000, timeoutSeconds: 2, coldHold: 4 }),
    compiled('pressure', 'SELECT 80 + length({service:String}) * 0', {
      params: ['service'],
      metricType: 'Value',
      deadlineMs: 1_000,
      timeoutSeconds: 2,
    }),
  ];
  t = await makeApp({ queries, clickhouse, clock });
});
afterAll(async () => {
  await t?.app.close();
  for (const s of held) s.destroy();
  await new Promise<void>((resolve) => blackhole?.close(() => resolve()));
  await hangingClient?.close();
  await refusedClient?.close();
  await db?.close();
});

const metricsText = async () => (await get(t.app, '/metrics')).body.text as string;

describe('a ClickHouse that accepts and never answers', () => {
  it('answers cold_hold by the deadline on a cold key, last_good on a warm one', async () => {
    swap.use(db.handle.client);
    expect((await get(t.app, '/q/count?n=12')).body).toEqual({ value: 12, source: 'fresh', age_seconds: 0 });
    swap.use(hangingClient);
    clock.advance(3_000);
    expect(await get(t.app, '/q/count?n=12')).toMatchObject({ status: 200, body: { value: 12, source: 'last_good', age_seconds: 3 } });
    expect(await get(t.app, '/q/count?n=99')).toMatchObject({ status: 200, body: { value: 4, source: 'cold_hold' } });
    expect(await metricsText()).toMatch(/failsafe_answers_total\{query="count",reason="deadline"\} 2/);
    // The client-side abort ends the hung query: counted as a timeout, never cached.
    await vi.waitFor(async () => expect(await metricsText()).toMatch(/query_duration_seconds_count\{query="count",outcome="timeout"\} 2/), {
      timeout: 10_000,
    });
    expect((await get(t.app, '/q/count?n=12')).body).toMatchObject({ value: 12, source: 'last_good' });
  });

  it('a Value query answers the hold target, or last-good without one', async () => {
    swap.use(db.handle.client);
    expect((await get(t.app, '/keda/pressure?service=a')).body).toMatchObject({ value: 80, source: 'fresh' });
    swap.use(hangingClient);
    expect((await get(t.app, '/keda/pressure?service=a&hold=70')).body).toEqual({ value: 70, source: 'hold', age_seconds: 0 });
    expect((await get(t.app, '/keda/pressure?service=a')).body).toMatchObject({ value: 80, source: 'last_good' });
    expect((await get(t.app, '/keda/pressure?service=b&hold=70')).body).toMatchObject({ value: 70, source: 'hold' });
    expect((await get(t.app, '/keda/pressure?service=b')).body).toMatchObject({ value: 0, source: 'cold_hold' });
  });
});

describe('a refused port', () => {
  it('fails fast into last_good / cold_hold, recorded as an error', async () => {
    swap.use(db.handle.client);
    expect((await get(t.app, '/q/count?n=7')).body).toMatchObject({ value: 7, source: 'fresh' });
    swap.use(refusedClient);
    expect((await get(t.app, '/q/count?n=7')).body).toMatchObject({ value: 7, source: 'last_good' });
    expect((await get(t.app, '/q/count?n=8')).body).toMatchObject({ value: 4, source: 'cold_hold' });
    const status = (await get(t.app, '/status')).body as { queries: { count: { last_error: { reason: string; message: string } } } };
    expect(status.queries.count.last_error.reason).toBe('error');
    expect(status.queries.count.last_error.message).toMatch(/ECONNREFUSED/);
    expect(await metricsText()).toMatch(/failsafe_answers_total\{query="count",reason="error"\} 2/);
  });
});
