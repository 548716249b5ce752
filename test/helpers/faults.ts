import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { freePort } from './ports.js';

/**
 * Real-socket failure injectors standing where a ClickHouse HTTP interface
 * would be. They are NOT ClickHouse emulations: none of them ever answers a
 * value a client could take as a good result in time — a slow server answers
 * only after its delay (set it past the caller's deadline/abort), everything
 * else refuses, hangs, errors or sends bytes no client can parse.
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
