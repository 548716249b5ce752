import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ClickHouseHandle } from './client.js';
import { describeError } from '../errors.js';

/**
 * An HTTP front: the embedded engine (chdb: a real ClickHouse in this process) behind a
 * loopback HTTP listener speaking the part of ClickHouse's HTTP interface that
 * `@clickhouse/client` uses to run a query: the SQL in the POST body,
 * `param_<name>` values and settings in the URL. Each query is counted. It lets
 * the shim take its SERVER path (HTTP client, socket pool, a server's admission
 * defaults) with query parameters, which this machine's clickhouse-server
 * (18.16) does not have. The answer is the engine's own output; an engine
 * error is a 500 with ClickHouse's `Code: N. DB::Exception` text.
 *
 * Parameter values are passed on as ClickHouse text, which chdb's bind path
 * escapes once more: a value holding a backslash would not arrive intact, so
 * one is refused (the shim's parameter rule, [A-Za-z0-9_.:-], allows none).
 *
 * Used where processes in SERVER mode must share one embedded engine: the bench, the chaos
 * tests, and `verify-coordination --nemesis`, whose runner processes race through it
 * (docs/operations.md#verify-coordination). An INSERT sent as `client.insert` (the statement
 * in the URL's `query`, its rows in the body) runs as the statement followed by its rows.
 */
export interface EngineFront {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Queries received so far (pings not counted). */
  queries(): number;
  close(): Promise<void>;
}

/** URL keys that are not settings. */
const NOT_SETTINGS = new Set(['query_id', 'query', 'database', 'default_format', 'session_id', 'enable_http_compression']);

export interface EngineFrontOptions {
  /**
   * Run each query in a session of its own from the engine's statement sessions (one query
   * at a time per embedded connection, settings put back to DEFAULT after it, the statement
   * gate): what several client processes sharing the front need. Default false: every query
   * on the engine's one connection, one at a time.
   */
  readonly pooled?: boolean;
  /**
   * Called with each query's engine time in ms (from the engine call to the last byte of its
   * output; the HTTP around it not counted): the one-connection bench splits a slow answer
   * into the engine's part and the rest (bench/one-connection-bench.ts).
   */
  readonly onEngineTime?: (ms: number) => void;
  /**
   * Settings every query runs with unless its URL sets them: a server profile's defaults. The
   * one-connection bench gives its front `max_threads` = the cores it is pinned to, as a
   * server sizes it from the cores it sees (the engine itself counts the machine's).
   */
  readonly settings?: Readonly<Record<string, string>>;
}

/** A setting name as ClickHouse spells them; a pooled front puts each back with `SET <name> = DEFAULT`. */
const SETTING_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export async function startEngineFront(engine: ClickHouseHandle, options: EngineFrontOptions = {}): Promise<EngineFront> {
  let queries = 0;
  const pool = options.pooled ? engine.statementSessions() : undefined;
  const runOnEngine = async (query: string, params: Record<string, string>, settings: Record<string, string>): Promise<Buffer> => {
    const exec = async (client: ClickHouseHandle['client']): Promise<Buffer> => {
      const { stream } = await client.exec({ query, query_params: params, clickhouse_settings: settings });
      const out: Buffer[] = [];
      for await (const chunk of stream) out.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
      return Buffer.concat(out);
    };
    if (!pool) return exec(engine.client);
    return pool.runStatements(async () => {
      const session = await pool.acquire();
      try {
        return await exec(session.client);
      } catch (err) {
        await engine.afterQueryError(session.client, false);
        throw err;
      } finally {
        await pool.release(session, Object.keys(settings));
      }
    });
  };
  const observe = options.onEngineTime;
  const run =
    observe === undefined
      ? runOnEngine
      : async (query: string, params: Record<string, string>, settings: Record<string, string>): Promise<Buffer> => {
          const started = performance.now();
          try {
            return await runOnEngine(query, params, settings);
          } finally {
            observe(performance.now() - started);
          }
        };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if ((req.url ?? '').startsWith('/ping')) return void res.end('Ok.\n');
      queries += 1;
      void answer(run, req, Buffer.concat(chunks).toString('utf8'), res, options.settings);
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    queries: () => queries,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool?.close();
    },
  };
}

type Run = (query: string, params: Record<string, string>, settings: Record<string, string>) => Promise<Buffer>;

async function answer(run: Run, req: IncomingMessage, body: string, res: ServerResponse, defaults: Readonly<Record<string, string>> = {}): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://front');
  const params: Record<string, string> = {};
  const settings: Record<string, string> = { ...defaults };
  for (const [key, value] of url.searchParams) {
    if (key.startsWith('param_')) params[key.slice('param_'.length)] = value;
    else if (!NOT_SETTINGS.has(key)) settings[key] = value;
  }
  const inUrl = url.searchParams.get('query');
  const query = inUrl !== null && body.length > 0 ? `${inUrl}\n${body}` : body.length > 0 ? body : (inUrl ?? '');
  const escaped = Object.entries(params).find(([, value]) => value.includes('\\'));
  if (escaped !== undefined) return fail(res, 36, `param_${escaped[0]} holds a backslash, which this front cannot pass on intact`);
  const badSetting = Object.keys(settings).find((key) => !SETTING_NAME.test(key));
  if (badSetting !== undefined) return fail(res, 115, `unknown setting ${JSON.stringify(badSetting)}`);
  try {
    const out = await run(query, params, settings);
    res.writeHead(200, { 'Content-Type': 'application/json; charset=UTF-8', 'X-ClickHouse-Server-Display-Name': 'engine-front' });
    res.end(out);
  } catch (err) {
    const code = Number((err as { code?: unknown }).code ?? 1002);
    // The engine's error type goes on as ClickHouse writes it, `… (KEEPER_EXCEPTION)`, so a
    // client reads the same `type` from the front as from a server (Keeper claims need it).
    const type = (err as { type?: unknown }).type;
    const message = err instanceof Error ? err.message : describeError(err);
    fail(res, Number.isFinite(code) ? code : 1002, typeof type === 'string' && type !== '' ? `${message} (${type})` : describeError(err));
  }
}

function fail(res: ServerResponse, code: number, message: string): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(500, { 'Content-Type': 'text/plain; charset=UTF-8', 'X-ClickHouse-Exception-Code': String(code) });
  res.end(`Code: ${code}. DB::Exception: ${message}\n`);
}
