import { spawn } from 'node:child_process';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { protoPath } from '../../../src/shim/grpc/proto.js';
import type { RunningGrpc } from '../../../src/shim/grpc/server.js';
import { openTestDatabase, type TestDatabase } from '../../helpers/clickhouse.js';
import { compiled, get, type AppUnderTest } from '../../helpers/shim.js';
import { until, type ActivityStream, type ScalerClient } from '../../helpers/grpc-client.js';
import { startGrpcUnderTest, type GrpcUnderTest } from '../../helpers/grpc.js';

/**
 * StreamIsActive's shared check on the real engine: many streams of one query
 * and params cost one query per check; changes only are sent, per stream's
 * own activation threshold; a client that goes away frees its stream, and the
 * loop stops when none is left; a reload that removes the query ends its
 * streams with the error a new call would get.
 */
let db: TestDatabase;
let t: AppUnderTest;
let grpc: RunningGrpc;
let client: ScalerClient;
let g: GrpcUnderTest;
const table = () => `\`${db.database}\`.backlog`;

beforeAll(async () => {
  db = await openTestDatabase('grpc_streams');
  await db.handle.client.command({ query: `CREATE TABLE ${table()} (n UInt32) ENGINE = Memory` });
  g = await startGrpcUnderTest({ queries: [compiled('work', `SELECT count() FROM ${table()}`), compiled('other', 'SELECT 1')], clickhouse: db.handle });
  ({ t, grpc, client } = g);
});
afterAll(async () => {
  await g?.close();
  await db?.close();
});

const checks = () => g.freshChecks();

describe('many streams, one check', () => {
  it('groups streams by query and params: one ClickHouse query per check, each stream its own threshold, changes only', async () => {
    const low: ActivityStream[] = Array.from({ length: 20 }, () => client.streamIsActive({ query: 'work', scalerAddress: 'x' }));
    const high = client.streamIsActive({ query: 'work', activationTargetValue: '1' });
    await until(() => grpc.streams.size === 21 && [...low, high].every((s) => s.messages.length === 1), 'every first state');
    expect(grpc.streams.groupCount).toBe(1);
    // /status shows the port and its streams: 21 streams behind one shared check.
    expect((await get(t.app, '/status')).body.grpc).toEqual({ address: grpc.address, open_streams: 21, stream_checks: 1 });
    const queries0 = t.app.shim.executor.queriesStarted;
    const checks0 = await checks();
    await until(async () => (await checks()) >= checks0 + 5, 'five more checks');
    const checks1 = await checks();
    const queries1 = t.app.shim.executor.queriesStarted;
    // One query per check of the group (not 21); a check may be between start and count.
    expect(queries1 - queries0).toBeLessThanOrEqual(checks1 - checks0 + 1);
    expect([...low, high].every((s) => s.messages.length === 1 && s.messages[0] === false)).toBe(true);

    await db.handle.client.command({ query: `INSERT INTO ${table()} VALUES (1)` });
    await until(() => low.every((s) => s.messages.length === 2), 'the low streams to turn true');
    expect(low.every((s) => s.messages[1] === true)).toBe(true);
    await db.handle.client.command({ query: `INSERT INTO ${table()} VALUES (2)` });
    await until(() => high.messages.length === 2, 'the high stream to turn true');
    expect(high.messages).toEqual([false, true]);
    expect(low.every((s) => s.messages.length === 2)).toBe(true);

    for (const s of low) s.cancel();
    await until(() => grpc.streams.size === 1, 'the cancelled streams to be freed');
    high.cancel();
    await until(() => grpc.streams.size === 0 && grpc.streams.groupCount === 0, 'every stream freed');
    // No streams, no loop: no more checks run.
    const idle = t.app.shim.executor.queriesStarted;
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(t.app.shim.executor.queriesStarted).toBe(idle);
    expect((await get(t.app, '/metrics')).body.text).toMatch(/dfe_keda_shim_grpc_open_streams 0/);
    expect((await get(t.app, '/status')).body.grpc).toEqual({ address: grpc.address, open_streams: 0, stream_checks: 0 });
  });
});

describe('a reload that removes the query', () => {
  it('ends its streams with INVALID_ARGUMENT and the HTTP message', async () => {
    const stream = client.streamIsActive({ query: 'other' });
    await until(() => stream.messages.length === 1, 'the first state');
    t.catalogue.apply([compiled('work', `SELECT count() FROM ${table()}`)]);
    await until(() => stream.ended !== undefined, 'the stream to end');
    expect(stream.ended).toEqual({ code: status.INVALID_ARGUMENT, details: 'unknown query "other"' });
    expect(grpc.streams.size).toBe(0);
  });
});

/** A client in its own process: opens one stream, prints `open` at its first message, then waits to be killed. */
const HOLDER = `
import { credentials, loadPackageDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
const [proto, address] = process.argv.slice(1);
const Ctor = loadPackageDefinition(loadSync(proto, { keepCase: true })).externalscaler.ExternalScaler;
const client = new Ctor(address, credentials.createInsecure());
const stream = client.StreamIsActive({ name: 'held', namespace: 'ns', scalerMetadata: { query: 'work' } });
stream.once('data', () => process.stdout.write('open\\n'));
stream.on('error', () => undefined);
`;

describe('a client process that dies', () => {
  it('frees its stream (the connection closes; no cancel was sent)', async () => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', HOLDER, protoPath(), grpc.address], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      await until(() => out.includes('open') && grpc.streams.size === 1, 'the child stream to open');
      child.kill('SIGKILL');
      await until(() => grpc.streams.size === 0, 'the stream to be freed');
      expect(grpc.streams.groupCount).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
