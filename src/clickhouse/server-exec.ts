import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { parseError, type ClickHouseClient } from '@clickhouse/client';

/**
 * A server client's `exec` (the shim's one read: src/shim/clickhouse-query.ts) sent
 * with Node's own HTTP client instead of through `@clickhouse/client`'s request path.
 *
 * Why: the library waits one timer (`setTimeout(0)`, at least 1 ms in Node) before
 * every request, to let its idle-socket timers run (clickhouse-js issue 294), and
 * streams the SQL body through `Readable.from`. Measured on one connection
 * (docs/performance.md#one-connection-where-the-tail-went): about 1.3 ms of latency
 * and 0.3 ms of CPU per query over Node's `http`, the same request, on every fresh
 * answer. Here the SQL is written with the request's `end(sql)`; stale sockets
 * are checked by their age when a request takes one (no timer has to run first),
 * and a request whose reused socket the server had closed is sent once more on a
 * new one (a read: nothing ran).
 *
 * The request is the library's, byte for byte where ClickHouse reads it
 * (test/clickhouse/server-exec.test.ts compares them): the SQL as the POST body,
 * `database` (the URL's path, when it has one), the settings, `param_<name>` values
 * in the library's text format, Basic auth (the `X-ClickHouse-User`/`-Key` headers
 * with a custom CA, as the library does). Errors are the library's: a non-2xx
 * answer is read and parsed with its `parseError`. Anything this does not cover
 * goes to the library's own `exec`: a URL with search parameters (library
 * options), `values`, sessions, other option keys, a parameter value of another
 * type.
 */
export interface ServerExecOptions {
  readonly url: string;
  readonly username: string;
  readonly password: string;
  readonly requestTimeoutMs: number;
  /** 0: no keep-alive (a connection per query), as the library's `keep_alive.enabled: false`. */
  readonly idleSocketTtlMs: number;
  readonly maxSockets: number;
  /** https only: a custom CA (sent credentials move to X-ClickHouse-User/-Key, as the library's). */
  readonly ca?: Buffer;
  /** https only: false accepts any certificate. */
  readonly verifyTls: boolean;
}

type ExecParams = Parameters<ClickHouseClient['exec']>[0];
type ExecResult = Awaited<ReturnType<ClickHouseClient['exec']>>;

/** The option keys this path sends; a call with any other goes to the library. */
const HANDLED = new Set(['query', 'query_params', 'clickhouse_settings', 'abort_signal', 'http_headers']);

/** Errors of a kept-alive socket the server closed while it was idle: nothing of the request ran. */
const STALE_SOCKET = new Set(['ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED']);

/** Most bytes of an error answer read for its message. */
const MAX_ERROR_BYTES = 64 * 1024;

export interface ServerExec {
  /** Closes its sockets (the handle's close). */
  close(): void;
}

export function sendExecsDirectly(client: ClickHouseClient, options: ServerExecOptions): ServerExec | undefined {
  const base = new URL(options.url);
  if (base.search !== '' || (base.protocol !== 'http:' && base.protocol !== 'https:')) return undefined;
  const https = base.protocol === 'https:';
  const keepAlive = options.idleSocketTtlMs > 0;
  const pool = { keepAlive, maxSockets: options.maxSockets };
  const agent = https
    ? new HttpsAgent({ ...pool, ...(options.ca ? { ca: options.ca } : {}), rejectUnauthorized: options.verifyTls })
    : new HttpAgent(pool);
  const send = https ? httpsRequest : httpRequest;
  const freedAt = new WeakMap<Socket, number>();
  agent.on('free', (socket: Socket) => freedAt.set(socket, Date.now()));
  // The library's reading of the URL: its path names the database; without one, none is sent.
  const path = decodeURIComponent(base.pathname.replace(/^\/+/, ''));
  const origin = `${base.protocol}//${base.host}/?`;
  const database = path === '' ? undefined : `database=${encodeURIComponent(path)}`;
  const fixedHeaders: OutgoingHttpHeaders = {
    Connection: keepAlive ? 'keep-alive' : 'close',
    'User-Agent': 'dfe-keda-shim',
    ...(options.ca
      ? { 'X-ClickHouse-User': options.username, 'X-ClickHouse-Key': options.password }
      : { Authorization: `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}` }),
  };

  /**
   * Closes the free sockets idle for the TTL or longer, by their age: no timer has to have run.
   * Resolves once the agent has let go of them (their 'close'), so the request that follows
   * cannot be given one; with none stale (every request but the first after an idle spell)
   * nothing is waited for.
   */
  const dropStaleSockets = (): Promise<unknown> | undefined => {
    const limit = Date.now() - options.idleSocketTtlMs;
    let closing: Promise<unknown>[] | undefined;
    for (const sockets of Object.values(agent.freeSockets)) {
      for (const socket of sockets ?? []) {
        if ((freedAt.get(socket) ?? 0) > limit) continue;
        (closing ??= []).push(new Promise((closed) => socket.once('close', closed)));
        socket.destroy();
      }
    }
    return closing && Promise.all(closing);
  };

  type Sent = { res: IncomingMessage; reused: boolean; settled: () => void } | { err: unknown; reused: boolean; answered: boolean };
  const sendOnce = (url: string, headers: OutgoingHttpHeaders, body: string, signal: AbortSignal | undefined) =>
    new Promise<Sent>((resolve) => {
      const req = send(url, { method: 'POST', agent, headers: { ...headers, 'Content-Length': Buffer.byteLength(body) } });
      let answered = false;
      const onAbort = () => req.destroy(new Error('The user aborted a request.'));
      signal?.addEventListener('abort', onAbort, { once: true });
      /** The abort and the timeout stop applying (the caller owns the answer's body from here, as with the library). */
      const settled = () => {
        signal?.removeEventListener('abort', onAbort);
        req.setTimeout(0);
      };
      req.setTimeout(options.requestTimeoutMs, () => req.destroy(new Error('Timeout error.')));
      req.on('response', (res) => {
        answered = true;
        resolve({ res, reused: req.reusedSocket, settled });
      });
      req.on('error', (err) => {
        settled();
        resolve({ err, reused: req.reusedSocket, answered });
      });
      req.end(body);
    });

  const exec = client.exec.bind(client);
  client.exec = async (params: ExecParams): Promise<ExecResult> => {
    const search = searchOf(params);
    if (search === undefined) return exec(params);
    // searchOf's text starts with '&' before each pair: the first goes when nothing precedes it.
    const url = database === undefined ? `${origin}${search.slice(1)}` : `${origin}${database}${search}`;
    const headers = params.http_headers ? { ...params.http_headers, ...fixedHeaders } : fixedHeaders;
    const signal = params.abort_signal;
    const attempt = async (): Promise<Sent> => {
      if (keepAlive) await dropStaleSockets();
      if (signal?.aborted) throw new Error('The user aborted a request.');
      return sendOnce(url, headers, params.query, signal);
    };
    let sent = await attempt();
    // A kept-alive socket the server had closed fails before any answer: nothing ran, send again.
    if ('err' in sent && sent.reused && !sent.answered && isStale(sent.err)) sent = await attempt();
    if ('err' in sent) throw sent.err;
    const { res, settled } = sent;
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) {
      settled();
      return { stream: res, query_id: String(res.headers['x-clickhouse-query-id'] ?? ''), response_headers: res.headers, http_status_code: status } as ExecResult;
    }
    // An error's text is read under the request's abort and timeout: a stalled one cannot hold the call.
    try {
      throw parseError(await readText(res, MAX_ERROR_BYTES));
    } finally {
      settled();
    }
  };
  return { close: () => agent.destroy() };
}

function isStale(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && STALE_SOCKET.has(code);
}

/** `&<settings>&param_<name>=…`, or undefined when a key or value is one this path does not send. */
function searchOf(params: ExecParams): string | undefined {
  for (const key of Object.keys(params)) if (!HANDLED.has(key)) return undefined;
  let search = '';
  for (const [name, value] of Object.entries(params.clickhouse_settings ?? {})) {
    if (value === undefined) continue;
    const text = typeof value === 'boolean' ? (value ? '1' : '0') : typeof value === 'number' || typeof value === 'string' ? String(value) : undefined;
    if (text === undefined) return undefined;
    search += `&${encodeURIComponent(name)}=${encodeURIComponent(text)}`;
  }
  for (const [name, value] of Object.entries((params.query_params ?? {}) as Record<string, unknown>)) {
    const text = paramText(value);
    if (text === undefined) return undefined;
    search += `&param_${encodeURIComponent(name)}=${encodeURIComponent(text)}`;
  }
  return search;
}

/**
 * A parameter value as ClickHouse's HTTP interface reads it for its `{name:Type}`: a
 * string escaped (backslash, quote, tab, newline, carriage return), a number as text
 * (`nan`, `+inf`, `-inf`), a boolean as 1/0, an array as a literal of quoted strings,
 * numbers or TRUE/FALSE. Undefined for anything else (the library's exec takes it).
 */
export function paramText(value: unknown): string | undefined {
  if (typeof value === 'string') return escaped(value);
  if (typeof value === 'number') return numberText(value);
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (Array.isArray(value)) {
    const items: string[] = [];
    for (const item of value as unknown[]) {
      if (typeof item === 'string') items.push(`'${escaped(item)}'`);
      else if (typeof item === 'number') items.push(numberText(item));
      else if (typeof item === 'boolean') items.push(item ? 'TRUE' : 'FALSE');
      else return undefined;
    }
    return `[${items.join(',')}]`;
  }
  return undefined;
}

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', "'": "\\'", '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function escaped(text: string): string {
  return text.replace(/[\\'\t\n\r]/g, (c) => ESCAPES[c] ?? c);
}

function numberText(n: number): string {
  if (Number.isNaN(n)) return 'nan';
  if (n === Infinity) return '+inf';
  if (n === -Infinity) return '-inf';
  return String(n);
}

async function readText(res: IncomingMessage, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    if (bytes < maxBytes) chunks.push(chunk);
    bytes += chunk.length;
  }
  return Buffer.concat(chunks).toString('utf8');
}
