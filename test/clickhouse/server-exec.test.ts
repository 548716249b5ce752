import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClickHouseError, createClient, type ClickHouseSettings } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { startEngineFront, type EngineFront } from '../../src/clickhouse/http-front.js';
import { paramText, sendExecsDirectly } from '../../src/clickhouse/server-exec.js';
import { loadConfig } from '../../src/config/load.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { certDir } from '../helpers/certs.js';
import { needs } from '../helpers/requirement.js';
import { recordingFront, type RecordedRequest, type RecordingFront } from '../telemetry/recording-front.js';

/**
 * A server client's `exec` goes out through Node's own HTTP client
 * (src/clickhouse/server-exec.ts): the request equals the library's where
 * ClickHouse reads it (a recording socket, the library's own client beside it),
 * a real engine behind an HTTP front and Debian's clickhouse-server 18.16 answer
 * it, errors are the library's, a stale kept-alive socket is retried once on a
 * new one, and what it does not cover still goes through the library.
 */
const open = (url: string, env: Record<string, string> = {}): Promise<ClickHouseHandle> =>
  openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: url, ...env }).clickhouse);
const text = async (client: ClickHouseHandle['client'], query: string, params: Record<string, unknown> = {}, settings: ClickHouseSettings = {}): Promise<string> => {
  const { stream } = await client.exec({ query, query_params: params, clickhouse_settings: settings });
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};

/** What ClickHouse reads of a request: method, path, URL parameters but the random query_id, body, credentials. */
function asRead(sent: RecordedRequest | undefined) {
  const url = new URL(sent?.url ?? '', 'http://front');
  const search = [...url.searchParams].filter(([key]) => key !== 'query_id').sort(([a], [b]) => a.localeCompare(b));
  return { path: url.pathname, search, body: sent?.body, authorization: sent?.headers.authorization, traceparent: sent?.headers.traceparent };
}

const TRICKY = {
  s_quote: "it's",
  s_escapes: 'back\\slash\ttab\nnewline\rreturn',
  s_controls: 'bell\u0007nul\u0000ff\f',
  s_unicode: 'ünïcødé 😀',
  s_empty: '',
  n_int: 42,
  n_negative: -1.5,
  n_big: 1e21,
  n_nan: Number.NaN,
  n_inf: Number.POSITIVE_INFINITY,
  n_minus_inf: Number.NEGATIVE_INFINITY,
  b_true: true,
  b_false: false,
  a_strings: ["it's", 'back\\slash', 'new\nline', ''],
  a_numbers: [1, -2.5],
  a_booleans: [true, false],
  a_empty: [],
};

describe('what a server client sends', () => {
  let front: RecordingFront;
  beforeAll(async () => {
    front = await recordingFront(3);
  });
  afterAll(async () => {
    await front?.close();
  });

  for (const path of ['', '/analytics']) {
    it(`equals the library's request${path ? ' with a database in the URL path' : ''}: parameters of every kind, settings, credentials, headers`, async () => {
      const url = `${front.url}${path}`;
      const ours = await open(url, { DFE_CLICKHOUSE_USERNAME: 'reader', DFE_CLICKHOUSE_PASSWORD: 'p@ss:word' });
      const library = createClient({ url, username: 'reader', password: 'p@ss:word' });
      try {
        const sql = 'SELECT {s_quote:String} AS v FORMAT JSONCompact';
        const settings = { max_execution_time: 5, output_format_json_quote_denormals: 1, readonly: '2', log_queries: 1 } satisfies ClickHouseSettings;
        for (const client of [ours.client, library]) {
          const { stream } = await client.exec({ query: sql, query_params: TRICKY, clickhouse_settings: settings, http_headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });
          for await (const chunk of stream) void chunk;
        }
        const [mine, theirs] = front.requests.splice(0);
        expect(asRead(mine)).toEqual(asRead(theirs));
        expect(asRead(mine).body).toBe(sql);
        // No empty pair (`?&…`), which a server reads as a setting with no name.
        expect(mine?.url).not.toMatch(/[?&]&|&$/);
        expect(mine?.headers['user-agent']).toBe('dfe-keda-shim');
      } finally {
        await ours.close();
        await library.close();
      }
    });
  }

  it('an exec with values, or with an option it does not send, goes through the library', async () => {
    const handle = await open(front.url);
    try {
      await handle.client.exec({ query: 'INSERT INTO t FORMAT TSV', values: Readable.from(['1\n2\n']) });
      await text(handle.client, 'SELECT 1', {}, {});
      await handle.client.exec({ query: 'SELECT 2', session_id: 'a-session' });
      const [insert, plain, session] = front.requests.splice(0);
      expect(new URL(insert?.url ?? '', 'http://front').searchParams.get('query')).toBe('INSERT INTO t FORMAT TSV');
      expect(insert?.body).toBe('1\n2\n');
      expect(insert?.headers['user-agent']).toMatch(/^clickhouse-js\//);
      expect(plain?.headers['user-agent']).toBe('dfe-keda-shim');
      expect(new URL(session?.url ?? '', 'http://front').searchParams.get('session_id')).toBe('a-session');
      expect(session?.headers['user-agent']).toMatch(/^clickhouse-js\//);
    } finally {
      await handle.close();
    }
  });

  it('a parameter value of a type it does not format is left to the library', () => {
    expect(paramText({ a: 1 })).toBeUndefined();
    expect(paramText([['nested']])).toBeUndefined();
    expect(paramText(null)).toBeUndefined();
  });

  it('a failing answer rejects with the library\'s ClickHouseError', async () => {
    const handle = await open(front.url);
    front.failing = true;
    try {
      const failed = await text(handle.client, 'SELECT 1').then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failed).toBeInstanceOf(ClickHouseError);
      expect(failed).toMatchObject({ code: '60', type: 'UNKNOWN_TABLE' });
    } finally {
      front.failing = false;
      front.requests.splice(0);
      await handle.close();
    }
  });
});

/**
 * A keep-alive server answering `{"data":[[1]]}` at once, counting the connections it accepts.
 * `onePerSocket`: each connection gets one answer, and a second request on it is met with a
 * reset (the kept-alive socket the server closed while it was idle).
 */
async function countingServer(onePerSocket = false): Promise<{ url: string; accepted: () => number; close: () => Promise<void> }> {
  let accepted = 0;
  const answered = new WeakSet<Socket>();
  const server: Server = createServer((req, res: ServerResponse) => {
    if (onePerSocket && answered.has(req.socket)) return void req.socket.resetAndDestroy();
    answered.add(req.socket);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"data":[[1]]}');
    });
  });
  server.on('connection', () => (accepted += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    accepted: () => accepted,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a kept-alive socket the server closed', () => {
  it('is retried once on a new socket: every exec answered, one connection each', async () => {
    const server = await countingServer(true);
    const handle = await open(server.url);
    try {
      for (let i = 0; i < 3; i++) expect(await text(handle.client, 'SELECT 1')).toBe('{"data":[[1]]}');
      expect(server.accepted()).toBe(3);
    } finally {
      await handle.close();
      await server.close();
    }
  });

  it('a fresh socket that fails is not retried: the error reaches the caller', async () => {
    const server = createServer((req) => req.socket.resetAndDestroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const handle = await open(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    let requests = 0;
    server.on('request', () => (requests += 1));
    try {
      await expect(text(handle.client, 'SELECT 1')).rejects.toMatchObject({ code: 'ECONNRESET' });
      expect(requests).toBe(1);
    } finally {
      await handle.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('idle sockets past the TTL', () => {
  it('several at once are all closed before the next burst takes a socket: every exec answered on a new connection', async () => {
    const server = await countingServer();
    const handle = await open(server.url, { DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: '20' });
    const burst = () => Promise.all(Array.from({ length: 4 }, () => text(handle.client, 'SELECT 1')));
    try {
      expect(await burst()).toEqual(Array(4).fill('{"data":[[1]]}'));
      const first = server.accepted();
      expect(first).toBeGreaterThanOrEqual(2);
      await sleep(200);
      expect(await burst()).toEqual(Array(4).fill('{"data":[[1]]}'));
      // None of the first burst's sockets was reused: every second-burst request opened its own.
      expect(server.accepted() - first).toBe(4);
    } finally {
      await handle.close();
      await server.close();
    }
  });
});

describe('an error answer whose text never ends', () => {
  it('the caller\'s abort still ends the call', async () => {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.write('Code: 159. DB::Exception: the rest never comes');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const handle = await open(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const controller = new AbortController();
    try {
      const call = handle.client.exec({ query: 'SELECT 1', abort_signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      await expect(call).rejects.toBeInstanceOf(Error);
    } finally {
      await handle.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('a direct client made by hand', () => {
  it('is not made for a URL with search parameters (the library\'s options)', async () => {
    const library = createClient({ url: 'http://127.0.0.1:1' });
    try {
      expect(sendExecsDirectly(library, { url: 'http://127.0.0.1:1/?database=x', username: 'default', password: '', requestTimeoutMs: 1000, idleSocketTtlMs: 100, maxSockets: 1, verifyTls: true })).toBeUndefined();
    } finally {
      await library.close();
    }
  });
});

describe('a real engine behind an HTTP front', () => {
  let db: TestDatabase;
  let front: EngineFront;
  let handle: ClickHouseHandle;
  beforeAll(async () => {
    db = await openTestDatabase('server_exec');
    front = await startEngineFront(db.handle);
    handle = await open(front.url);
  });
  afterAll(async () => {
    await handle?.close();
    await front?.close();
    await db?.close();
  });

  it('answers with the bound values, and a bad statement with the engine\'s error code', async () => {
    const answer = JSON.parse(await text(handle.client, 'SELECT {n:UInt8} + 1 AS v, {s:String} AS s, length({a:Array(String)}) AS n FORMAT JSONCompact', { n: 4, s: 'ünï cødé', a: ['x', 'y z'] })) as {
      data: unknown[][];
    };
    expect(answer.data).toEqual([[5, 'ünï cødé', 2]]);
    await expect(text(handle.client, 'SELECT * FROM no_such_table_here')).rejects.toMatchObject({ code: '60' });
  });
});

const certs = certDir('server-exec-tls');
certs.server();
const tlsGate = needs(certs.missing);

tlsGate.describe('over https', () => {
  let server: Server | undefined;
  let url = '';
  const seen: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
  beforeAll(async () => {
    const tls = createHttpsServer({ cert: readFileSync(certs.at('server.crt')), key: readFileSync(certs.at('server.key')) }, (req, res) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => res.end('{"data":[[1]]}'));
    });
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', () => resolve()));
    server = tls;
    url = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    certs.remove();
  });

  tlsGate.it('with a custom CA: verified, and the credentials in the headers the library uses there', async () => {
    const env = { DFE_CLICKHOUSE_CA_CERT: certs.at('server.crt'), DFE_CLICKHOUSE_USERNAME: 'reader', DFE_CLICKHOUSE_PASSWORD: 'secret' };
    const ours = await open(url, env);
    const library = createClient({ url, username: 'reader', password: 'secret', tls: { ca_cert: readFileSync(certs.at('server.crt')) } });
    try {
      expect(await text(ours.client, 'SELECT 1')).toBe('{"data":[[1]]}');
      const { stream } = await library.exec({ query: 'SELECT 1' });
      for await (const chunk of stream) void chunk;
      const [mine, theirs] = seen.splice(0);
      for (const header of ['authorization', 'x-clickhouse-user', 'x-clickhouse-key']) expect([header, mine?.headers[header]]).toEqual([header, theirs?.headers[header]]);
      expect(mine?.headers['x-clickhouse-user']).toBe('reader');
    } finally {
      await ours.close();
      await library.close();
    }
  });

  tlsGate.it('without the CA the certificate is refused; DFE_CLICKHOUSE_VERIFY=false accepts it', async () => {
    const verified = await open(url);
    const unverified = await open(url, { DFE_CLICKHOUSE_VERIFY: 'false' });
    try {
      await expect(text(verified.client, 'SELECT 1')).rejects.toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
      expect(await text(unverified.client, 'SELECT 1')).toBe('{"data":[[1]]}');
    } finally {
      seen.splice(0);
      await verified.close();
      await unverified.close();
    }
  });
});

const found = clickHouseServerAvailability();
const gate = needs(found.kind === 'missing' ? found.reason : undefined);

gate.describe('ClickHouse 18.16 answers a direct request', () => {
  let server: ClickHouseServerProcess;
  let handle: ClickHouseHandle;
  beforeAll(async () => {
    server = await startClickHouseServer();
    handle = await open(server.url);
  }, 60_000);
  afterAll(async () => {
    await handle?.close();
    await server?.dispose();
  });

  gate.it('runs a statement sent as the body, with a setting in the URL', async () => {
    const answer = JSON.parse(await text(handle.client, 'SELECT 40 + 2 AS v FORMAT JSONCompact', {}, { max_execution_time: 5 })) as { data: unknown[][] };
    expect(answer.data).toEqual([[42]]);
  });
});
