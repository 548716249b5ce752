import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { serverHandle, type ClickHouseClient } from '../../src/clickhouse/client.js';

/**
 * The server's side of the seam (src/clickhouse/client.ts): every run shares
 * the one client and nothing extra reaches the server. A real socket server
 * counts what arrives.
 */
let server: Server;
let hits = 0;
let client: ClickHouseClient;
beforeAll(async () => {
  server = createServer((req, res) => {
    hits += 1;
    req.resume();
    res.end('1\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  client = createClient({ url: `http://127.0.0.1:${port}`, log: { level: ClickHouseLogLevel.OFF } });
});
afterAll(async () => {
  await client?.close();
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});

describe('serverHandle', () => {
  it('statement sessions are the one client; gates run at once; reset, release and close send nothing', async () => {
    const handle = serverHandle(client, 'http://server');
    const sessions = handle.statementSessions();
    const [a, b] = await Promise.all([sessions.acquire(), sessions.acquire()]);
    expect(a.client).toBe(client);
    expect(b.client).toBe(client);
    expect(await sessions.runStatements(async () => 'ran')).toBe('ran');
    expect(await sessions.claimStart(async () => 'claimed')).toBe('claimed');
    await sessions.reset(a, ['max_threads']);
    await sessions.release(a, ['max_threads']);
    await sessions.close();
    await handle.afterQueryError(client, false);
    await handle.afterQueryError(client, true);
    expect(hits).toBe(0);
    expect(handle).toMatchObject({ backend: 'server', target: 'http://server' });
  });
});
