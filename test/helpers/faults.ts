import type { ClickHouseClient } from '@clickhouse/client';
import { Agent as HttpAgent, createServer as createHttpServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { freePort } from './ports.js';

/**
 * Real-socket failure injectors standing where a ClickHouse HTTP interface
 * would be. They are NOT ClickHouse emulations: none of them ever answers a
 * value a client could take as a good result in time — a slow server answers
 * only after its delay (set it past the caller's deadline/abort), everything
 * else refuses, hangs, errors or sends bytes no client can parse.
 *
 * The one exception is `stallingProxy`, which forwards untouched to a REAL
 * ClickHouse whatever it does not stall: what it passes on is that server's
 * own answer.
 *
 * All listen on 127.0.0.1 only. `hits()` counts what reached the socket
 * (HTTP requests, or raw connections for the non-HTTP ones), so a test can
 * prove a bad request never reached "ClickHouse".
 */
export interface FaultEndpoint {
  readonly port: number;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  hits(): number;
  close(): Promise<void>;
}

const LOOPBACK = '127.0.0.1';

/** Nothing listens there: every connect is refused (ECONNREFUSED). */
export async function refusedPort(): Promise<FaultEndpoint> {
  const port = await freePort();
  return { port, url: `http://${LOOPBACK}:${port}`, hits: () => 0, close: async () => undefined };
}

/** Accepts connections and never writes a byte: the client waits until its own timeout. */
export async function blackHoleServer(): Promise<FaultEndpoint> {
  return rawServer(() => {
    // hold the socket open; read and drop whatever arrives
  });
}

/** Accepts, writes bytes that are not HTTP, and closes. */
export async function rawGarbageServer(): Promise<FaultEndpoint> {
  return rawServer((socket) => {
    socket.end(Buffer.from('\x00\x01\x02SSH-2.0-not-clickhouse\r\n\xff\xfe', 'latin1'));
  });
}

/** Accepts and resets the connection at once (ECONNRESET / socket hang up). */
export async function resetServer(): Promise<FaultEndpoint> {
  return rawServer((socket) => socket.resetAndDestroy());
}

export interface SlowServerOptions {
  /** How long before anything is written, in ms. */
  readonly delayMs: number;
  /**
   * Body sent after the delay. Default: one JSONEachRow row `{"value":0}`, as
   * ClickHouse would send it. 0 is never higher than any good value.
   */
  readonly body?: string;
  /** `headers`: nothing at all until the delay; `body`: 200 headers at once, body after the delay. */
  readonly stall?: 'headers' | 'body';
}

/** Answers a ClickHouse-looking JSON body, late. */
export async function slowServer(options: SlowServerOptions): Promise<FaultEndpoint> {
  const body = options.body ?? '{"value":0}\n';
  const timers = new Set<NodeJS.Timeout>();
  return httpServer((_req, res) => {
    if (options.stall === 'body') {
      res.writeHead(200, clickHouseHeaders());
      res.flushHeaders();
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (res.destroyed) return;
      if (!res.headersSent) res.writeHead(200, clickHouseHeaders());
      res.end(body);
    }, options.delayMs);
    timers.add(timer);
  }, () => timers.forEach(clearTimeout));
}

/** Answers HTTP 500 with a ClickHouse-style exception text. */
export async function http500Server(): Promise<FaultEndpoint> {
  return httpServer((_req, res) => {
    res.writeHead(500, { 'Content-Type': 'text/plain; charset=UTF-8', 'X-ClickHouse-Exception-Code': '241' });
    res.end('Code: 241, e.displayText() = DB::Exception: Memory limit (total) exceeded (injected fault)\n');
  });
}

export type GarbageKind = 'html' | 'truncated-json' | 'short-body' | 'wrong-shape';

/**
 * HTTP 200 whose body is not a result: `html` (not JSON at all),
 * `truncated-json` (a complete HTTP response whose JSON stops mid-object),
 * `short-body` (Content-Length promises more than is sent, then the socket closes),
 * `wrong-shape` (valid JSON with no rows or columns in it, as a proxy's error page might be).
 */
export async function garbageServer(kind: GarbageKind): Promise<FaultEndpoint> {
  return httpServer((_req, res) => {
    switch (kind) {
      case 'html':
        res.writeHead(200, { ...clickHouseHeaders(), 'Content-Type': 'text/html' });
        res.end('<html><body>502 Bad Gateway (proxy says hi)</body></html>\n');
        return;
      case 'truncated-json':
        res.writeHead(200, clickHouseHeaders());
        res.end('{"value":');
        return;
      case 'wrong-shape':
        res.writeHead(200, clickHouseHeaders());
        res.end('{"error":"upstream unavailable","retry":true}\n');
        return;
      case 'short-body':
        res.writeHead(200, { ...clickHouseHeaders(), 'Content-Length': '64' });
        res.write('{"value":');
        setTimeout(() => res.socket?.destroy(), 5);
        return;
    }
  });
}

/**
 * HTTP 200 whose body is a COMPLETE, parseable JSON document that is not a
 * usable JSONCompact result (issue 9 item 1 and 2). None is a value to take:
 * `short-row` (a row with fewer cells than `meta`), `object-rows` (rows as
 * objects: another format's answer), `data-not-array`, `exception` (what
 * ClickHouse 23.8+ sends when an error happens after the response started: a
 * 200 with rows empty and an `exception` field), `huge` (1e306, past
 * float64 × 1000) and `over-int64` (1e16, past what KEDA can carry).
 */
export type MalformedKind = 'short-row' | 'object-rows' | 'data-not-array' | 'exception' | 'huge' | 'over-int64';

const META_2 = '"meta":[{"name":"a","type":"UInt64"},{"name":"value","type":"Float64"}]';

export function malformedBody(kind: MalformedKind): string {
  switch (kind) {
    case 'short-row':
      return `{${META_2},"data":[[7]],"rows":1}\n`;
    case 'object-rows':
      return `{${META_2},"data":[{"a":0,"value":0}],"rows":1}\n`;
    case 'data-not-array':
      return `{${META_2},"data":"0","rows":1}\n`;
    case 'exception':
      return `{${META_2},"data":[],"rows":0,"exception":"Code: 159. DB::Exception: Timeout exceeded: elapsed 1.0 seconds (injected). (TIMEOUT_EXCEEDED)"}\n`;
    case 'huge':
      return '{"meta":[{"name":"value","type":"Float64"}],"data":[[1e306]],"rows":1}\n';
    case 'over-int64':
      return '{"meta":[{"name":"value","type":"Float64"}],"data":[[1e16]],"rows":1}\n';
  }
}

export async function malformedServer(kind: MalformedKind): Promise<FaultEndpoint> {
  return httpServer((_req, res) => {
    res.writeHead(200, { ...clickHouseHeaders(), 'X-ClickHouse-Format': 'JSONCompact' });
    res.end(malformedBody(kind));
  });
}

/** A fault endpoint that also reports what happened to its connections. */
export interface SocketFaultEndpoint extends FaultEndpoint {
  /** Connections open right now. */
  openSockets(): number;
  /** Connections the CLIENT closed (or reset) so far. */
  closedByClient(): number;
  /** Response body bytes the server managed to hand to its sockets. */
  bytesWritten(): number;
}

/**
 * 200 headers, then: `half-body` — half of a JSONCompact document, then
 * silence for ever; `trickle` — one byte every 100 ms for ever (a socket
 * timeout never fires: there is always activity). The server never ends the
 * response; only the client can, by closing its socket.
 */
export async function stallServer(mode: 'half-body' | 'trickle'): Promise<SocketFaultEndpoint> {
  const timers = new Set<NodeJS.Timeout>();
  let written = 0;
  return trackedHttpServer(
    (_req, res) => {
      res.writeHead(200, { ...clickHouseHeaders(), 'X-ClickHouse-Format': 'JSONCompact' });
      res.flushHeaders();
      if (mode === 'half-body') {
        const half = '{"meta":[{"name":"value","type":"UInt64"}],"data":[[';
        res.write(half);
        written += half.length;
        return;
      }
      const timer = setInterval(() => {
        if (res.destroyed) return clearInterval(timer);
        res.write(' ');
        written += 1;
      }, 100);
      timers.add(timer);
      res.on('close', () => {
        clearInterval(timer);
        timers.delete(timer);
      });
    },
    () => written,
    () => timers.forEach(clearInterval),
  );
}

/**
 * 200 headers, then a JSONCompact document with `totalBytes` of rows (40 MB by
 * default), written in 64 KiB chunks that respect backpressure — so what the
 * server managed to write is what the client (and the kernel buffers between
 * them) took before closing the socket.
 */
export async function floodServer(totalBytes = 40 * 1024 * 1024): Promise<SocketFaultEndpoint> {
  let written = 0;
  return trackedHttpServer(
    (_req, res) => {
      res.writeHead(200, { ...clickHouseHeaders(), 'X-ClickHouse-Format': 'JSONCompact' });
      const head = '{"meta":[{"name":"value","type":"UInt64"}],"data":[[0]';
      const rows = ',[0]'.repeat(16 * 1024);
      let sent = 0;
      const pump = () => {
        if (sent === 0) {
          res.write(head);
          sent += head.length;
        }
        while (!res.destroyed && sent < totalBytes) {
          const ok = res.write(rows);
          sent += rows.length;
          written = sent;
          if (!ok) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end('],"rows":1}\n');
      };
      pump();
    },
    () => written,
  );
}

/**
 * A proxy in front of a REAL ClickHouse HTTP interface: a request whose SQL
 * (the POST body) contains `marker` is stalled (200 headers, half a body,
 * silence); every other request is forwarded untouched and its answer piped
 * back. So one ClickHouse serves healthy queries while chosen ones hang.
 */
export async function stallingProxy(targetUrl: string, marker: string): Promise<SocketFaultEndpoint & { stalled(): number }> {
  const target = new URL(targetUrl);
  let stalled = 0;
  const upstream = new HttpAgent({ keepAlive: true, maxSockets: 64 });
  const endpoint = await trackedHttpServer(
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const url = new URL(req.url ?? '/', target);
        if (body.toString('utf8').includes(marker) || url.search.includes(marker)) {
          stalled += 1;
          res.writeHead(200, { ...clickHouseHeaders(), 'X-ClickHouse-Format': 'JSONCompact' });
          res.write('{"meta":[{"name":"value","type":"UInt64"}],"data":[[');
          return;
        }
        // The body goes on whole, so its length replaces any chunked framing (both at once is invalid HTTP).
        const { 'transfer-encoding': _chunked, ...rest } = req.headers;
        const headers = { ...rest, host: target.host, 'content-length': String(body.length) };
        const forward = httpRequest(url, { method: req.method, headers, agent: upstream }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        forward.on('error', () => res.destroy());
        forward.end(body);
      });
    },
    () => 0,
    () => upstream.destroy(),
    // The request body must be read here, not drained.
    false,
  );
  return { ...endpoint, stalled: () => stalled };
}

async function trackedHttpServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  written: () => number,
  onClose: () => void = () => undefined,
  drainBody = true,
): Promise<SocketFaultEndpoint> {
  let hits = 0;
  let open = 0;
  let closedByClient = 0;
  let closing = false;
  const server = createHttpServer((req, res) => {
    hits += 1;
    if (drainBody) req.resume();
    handler(req, res);
  });
  server.on('connection', (socket: Socket) => {
    open += 1;
    socket.on('close', () => {
      open -= 1;
      if (!closing) closedByClient += 1;
    });
  });
  server.keepAliveTimeout = 60_000;
  await listen(server);
  const port = portOf(server);
  return {
    port,
    url: `http://${LOOPBACK}:${port}`,
    hits: () => hits,
    openSockets: () => open,
    closedByClient: () => closedByClient,
    bytesWritten: written,
    close: async () => {
      closing = true;
      onClose();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function clickHouseHeaders(): Record<string, string> {
  return {
    'Content-Type': 'application/json; charset=UTF-8',
    'X-ClickHouse-Format': 'JSONEachRow',
    'X-ClickHouse-Server-Display-Name': 'fault-injector',
  };
}

async function httpServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  onClose: () => void = () => undefined,
): Promise<FaultEndpoint> {
  let hits = 0;
  const server = createHttpServer((req, res) => {
    hits += 1;
    // Drain the request body (the SQL) so the client is never stuck writing it.
    req.resume();
    handler(req, res);
  });
  server.keepAliveTimeout = 1_000;
  await listen(server);
  const port = portOf(server);
  return {
    port,
    url: `http://${LOOPBACK}:${port}`,
    hits: () => hits,
    close: async () => {
      onClose();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function rawServer(onConnection: (socket: Socket) => void): Promise<FaultEndpoint> {
  let hits = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    hits += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.resume();
    onConnection(socket);
  });
  await listen(server);
  const port = portOf(server);
  return {
    port,
    url: `http://${LOOPBACK}:${port}`,
    hits: () => hits,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function listen(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, LOOPBACK, () => resolve());
  });
}

function portOf(server: Server): number {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fault server has no TCP address');
  return address.port;
}

/**
 * A server-backend handle whose client a test swaps between the real engine and a
 * faulty endpoint (hung, refused, answering garbage); nothing runs after a failed query,
 * as on a server.
 */
export interface SwappableHandle {
  readonly handle: { readonly backend: 'server'; readonly target: string; readonly afterQueryError: () => Promise<void>; readonly client: ClickHouseClient };
  use(client: ClickHouseClient): void;
}

export function swappableServerHandle(initial: ClickHouseClient): SwappableHandle {
  let current = initial;
  return {
    handle: {
      backend: 'server',
      target: 'http://127.0.0.1',
      afterQueryError: async () => undefined,
      get client() {
        return current;
      },
    },
    use(client) {
      current = client;
    },
  };
}
