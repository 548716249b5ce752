import { credentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningGrpc } from '../../../src/shim/grpc/server.js';
import { openTestDatabase, type TestDatabase } from '../../helpers/clickhouse.js';
import { compiled } from '../../helpers/shim.js';
import { scalerClient, until, type ScalerClient } from '../../helpers/grpc-client.js';
import { startGrpcUnderTest, type GrpcUnderTest } from '../../helpers/grpc.js';

/**
 * Keepalives do not end a stream: the server pings every 100 ms here (30 s in production)
 * and a client that pings often itself (grpc-go and grpc-js clients can be told to) is not
 * sent away. Time passes by the shim's own check counter (every 50 ms), not by sleeps.
 */
let db: TestDatabase;
let grpc: RunningGrpc;
let client: ScalerClient;
let g: GrpcUnderTest;

beforeAll(async () => {
  db = await openTestDatabase('grpc_keepalive');
  g = await startGrpcUnderTest({
    queries: [compiled('one', 'SELECT 1')],
    clickhouse: db.handle,
    server: { checkIntervalMs: 50, keepaliveTimeMs: 100, keepaliveTimeoutMs: 5_000 },
    client: (address) => scalerClient(address, credentials.createInsecure(), { 'grpc.keepalive_time_ms': 100, 'grpc.keepalive_permit_without_calls': 1 }),
  });
  ({ grpc, client } = g);
});
afterAll(async () => {
  await g?.close();
  await db?.close();
});

const checks = () => g.freshChecks();

describe('keepalive pings', () => {
  it('leave an open stream open, both ways', async () => {
    const stream = client.streamIsActive({ query: 'one' });
    await until(() => stream.messages.length === 1, 'the first state');
    // At least 40 checks of 50 ms: some 20 keepalive intervals of each side.
    const start = await checks();
    await until(async () => (await checks()) >= start + 40, 'forty checks');
    expect(stream.ended).toBeUndefined();
    expect(grpc.streams.size).toBe(1);
    expect(stream.messages).toEqual([true]);
    expect(await client.isActive({ query: 'one' })).toEqual({ result: true });
    stream.cancel();
    await until(() => grpc.streams.size === 0, 'the stream to be freed');
  });
});
