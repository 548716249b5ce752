import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse } from '../../src/clickhouse/client.js';
import { startEngineFront, type EngineFront } from '../../src/clickhouse/http-front.js';
import { loadConfig } from '../../src/config/load.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS reaches the server client and is honoured
 * (src/clickhouse/client.ts, and server-exec.ts for `exec`): a real engine behind the HTTP front, and a TCP
 * proxy in front of it that counts the connections it accepts. Two queries with
 * the same gap between them: a TTL well above the gap keeps the one connection,
 * a TTL well below it closes the idle socket so the second query opens another.
 * Counts only, no durations.
 *
 * Robust under load: the socket is freed in the turn of the loop in which the
 * first answer ends, so with the short TTL the client's idle timer (freed + 50 ms)
 * expires well before the test's gap timer (freed + 400 ms), and Node runs expired
 * timers in order of expiry: however late the loop gets there, the socket is closed
 * before the second query starts. With the long TTL (9 s, under the front's own 10 s
 * keep-alive), only a stall of over 8 s between two awaits could close it.
 */
const GAP_MS = 400;

let db: TestDatabase;
let front: EngineFront;
let proxy: CountingProxy;

beforeAll(async () => {
  db = await openTestDatabase('idle_ttl');
  front = await startEngineFront(db.handle);
  proxy = await countingProxy(Number(new URL(front.url).port));
});
afterAll(async () => {
  await proxy?.close();
  await front?.close();
  await db?.close();
});

/** Connections accepted while two queries, GAP_MS apart, ran through a client with this TTL. */
async function connectionsForTwoQueries(ttl: string, gapMs: number, via: 'query' | 'exec'): Promise<number> {
  const handle = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: proxy.url, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: ttl }).clickhouse);
  const before = proxy.accepted();
  try {
    for (const n of [1, 2]) {
      if (n === 2 && gapMs > 0) await sleep(gapMs);
      if (via === 'query') {
        const rs = await handle.client.query({ query: 'SELECT {n:UInt8} AS n', query_params: { n }, format: 'JSONEachRow' });
        expect(await rs.json<{ n: number }>()).toEqual([{ n }]);
      } else {
        const { stream } = await handle.client.exec({ query: 'SELECT {n:UInt8} AS n FORMAT JSONEachRow', query_params: { n } });
        let text = '';
        for await (const chunk of stream) text += String(chunk);
        expect(JSON.parse(text)).toEqual({ n });
      }
    }
    return proxy.accepted() - before;
  } finally {
    await handle.close();
  }
}

// `query` goes through the library's socket pool, `exec` (the shim's reads) through
// server-exec.ts's own agent: the setting holds for both.
describe.each(['query', 'exec'] as const)('DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS, %s', (via) => {
  it('a TTL longer than the gap between two queries: both go over one connection', async () => {
    expect(await connectionsForTwoQueries('9000', GAP_MS, via)).toBe(1);
  });

  it('a TTL shorter than the gap: the idle socket is closed, the second query opens another', async () => {
    expect(await connectionsForTwoQueries('50', GAP_MS, via)).toBe(2);
  });

  it('0 turns keep-alive off: a connection per query, even back to back', async () => {
    expect(await connectionsForTwoQueries('0', 0, via)).toBe(2);
  });
});

interface CountingProxy {
  readonly url: string;
  accepted(): number;
  close(): Promise<void>;
}

/** A TCP pass-through to 127.0.0.1:`port` that counts the connections it accepts. */
async function countingProxy(port: number): Promise<CountingProxy> {
  let accepted = 0;
  const open = new Set<Socket>();
  const server: Server = createServer((downstream) => {
    accepted += 1;
    const upstream = connect(port, '127.0.0.1');
    for (const socket of [downstream, upstream]) {
      open.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        open.delete(socket);
        downstream.destroy();
        upstream.destroy();
      });
    }
    downstream.pipe(upstream).pipe(downstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    accepted: () => accepted,
    close: async () => {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
