import { readFileSync } from 'node:fs';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseConfig } from '../config/load.js';
import { DfeError, describeError } from '../errors.js';
import { openEmbedded } from './embedded.js';
import { sharedSessionPool, type SessionPool } from './sessions.js';
import { sendExecsDirectly } from './server-exec.js';
import { markServer } from './traced-query.js';

export type { ClickHouseClient } from '@clickhouse/client';
export type { SessionPool, StatementSession } from './sessions.js';

/**
 * Sockets of a server client's pool (the library's default is 10). The shim
 * keeps its queries in flight under this (src/shim/executor.ts MAX_INFLIGHT),
 * so a stalled query never makes another wait for a socket
 * (docs/failsafe.md#one-keys-fault-stays-its-own).
 */
export const MAX_OPEN_CONNECTIONS = 256;

/**
 * The one seam between a ClickHouse server and the embedded engine
 * (docs/architecture.md, docs/embedded.md). Callers run the same SQL through
 * the same client and ask the handle for what differs; none asks which backend
 * it is. The server's implementation is below; its one transport choice (the
 * shim's reads sent with Node's own HTTP client) is server-exec.ts. The embedded engine's,
 * with the quirks it works around, is embedded.ts.
 */
export interface ClickHouseHandle {
  readonly client: ClickHouseClient;
  /** Which engine, for /status and the start-up log only: no caller branches on it. */
  readonly backend: 'server' | 'embedded';
  /** Where it points, without credentials: a URL or `embedded:<path>`. */
  readonly target: string;
  /**
   * Where hunt statements run (sessions.ts). `open` replaces how the embedded
   * engine opens another session (tests); a server shares its one client.
   */
  statementSessions(open?: () => Promise<ClickHouseHandle>): SessionPool;
  /**
   * Called after a query on `client` (this handle's, read when the query
   * started) failed; `aborted` when the caller gave up on it. Nothing on a
   * server; a drain on the embedded engine.
   */
  readonly afterQueryError: (client: ClickHouseClient, aborted: boolean) => Promise<void>;
  close(): Promise<void>;
}

/**
 * The server backend's handle around a client: every HTTP request carries its
 * own settings and the client pools sockets, so every session is the one
 * client and nothing is needed after an error.
 */
export function serverHandle(client: ClickHouseClient, target: string): ClickHouseHandle {
  return {
    client,
    backend: 'server',
    target,
    statementSessions: () => sharedSessionPool(client),
    afterQueryError: async () => undefined,
    close: () => client.close(),
  };
}

/**
 * The one factory for ClickHouse clients. Both backends are `@clickhouse/client`;
 * the embedded one plugs chdb's in-process engine in through the `connection`
 * option (embedded.ts), so every caller runs the same SQL through the same API.
 */
export async function openClickHouse(config: ClickHouseConfig): Promise<ClickHouseHandle> {
  if (config.backend === 'embedded') return openEmbedded(config.embeddedPath, config.embeddedConfigFile);
  // The config loader refuses backend=server without a URL (config/load.ts).
  const url = config.url as string;
  const tls = config.caCertPath ? { ca_cert: readCaCert(config.caCertPath) } : undefined;
  const client = createClient({
    url,
    username: config.username,
    password: config.password,
    request_timeout: config.requestTimeoutMs,
    // The shim is read-only (readonly=2) in production: settings are per query, never
    // session-wide, so nothing here needs write access.
    clickhouse_settings: {},
    ...(tls ? { tls } : {}),
    // DFE_CLICKHOUSE_VERIFY=false: accept any server certificate (only meaningful over https).
    ...(!config.verifyTls && url.startsWith('https:') ? { http_agent: await insecureAgent(config.idleSocketTtlMs > 0) } : {}),
    keep_alive: keepAliveOf(config.idleSocketTtlMs),
    max_open_connections: MAX_OPEN_CONNECTIONS,
    // The client's own logger writes every failed request (with a stack) to the
    // console, outside pino and its once-per-key-per-minute rate limit: during an
    // outage that floods the logs. Callers log failures themselves.
    log: { level: ClickHouseLogLevel.OFF },
  });
  const direct = sendExecsDirectly(client, {
    url,
    username: config.username,
    password: config.password,
    requestTimeoutMs: config.requestTimeoutMs,
    idleSocketTtlMs: config.idleSocketTtlMs,
    maxSockets: MAX_OPEN_CONNECTIONS,
    ...(tls ? { ca: tls.ca_cert } : {}),
    verifyTls: config.verifyTls,
  });
  markServer(client, url);
  const handle = serverHandle(client, url);
  if (direct === undefined) return handle;
  return {
    ...handle,
    close: async () => {
      direct.close();
      await handle.close();
    },
  };
}

/**
 * The client's keep-alive for DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: an idle socket is
 * closed by the client after that many ms, so it must stay below the server's
 * `keep_alive_timeout` (else the client may send on a socket the server has closed).
 * 0 turns keep-alive off (`Connection: close`, a new connection per query). It is
 * not passed on as the library's `idle_socket_ttl: 0`, which means "no TTL": idle
 * sockets kept until the server drops them, the stale reuse this setting avoids.
 */
function keepAliveOf(idleSocketTtlMs: number): { enabled: boolean; idle_socket_ttl?: number } {
  return idleSocketTtlMs > 0 ? { enabled: true, idle_socket_ttl: idleSocketTtlMs } : { enabled: false };
}

function readCaCert(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new DfeError('CONFIG_INVALID', `invalid DFE_CLICKHOUSE_CA_CERT=${JSON.stringify(path)}: cannot read it (${describeError(err)})`, {
      key: 'DFE_CLICKHOUSE_CA_CERT',
      value: path,
      cause: err,
    });
  }
}

/** A given agent takes the place of the client's own: its keep-alive follows the setting too. */
async function insecureAgent(keepAlive: boolean) {
  const https = await import('node:https');
  return new https.Agent({ rejectUnauthorized: false, keepAlive, maxSockets: MAX_OPEN_CONNECTIONS });
}
