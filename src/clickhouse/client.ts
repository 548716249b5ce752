import { mkdirSync, readFileSync } from 'node:fs';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseConfig } from '../config/load.js';
import { DfeError, describeError } from '../errors.js';

export type { ClickHouseClient } from '@clickhouse/client';

/**
 * The client's own logger writes to the console, outside pino and its redaction.
 * Every failure surfaces as a rejected promise that our callers log, so it is off.
 */
const CLIENT_LOG = { level: ClickHouseLogLevel.OFF };

/**
 * Sockets of a server client's pool (the library's default is 10). The shim
 * keeps its queries in flight under this (src/shim/executor.ts MAX_INFLIGHT),
 * so a stalled query never makes another wait for a socket
 * (docs/failsafe.md#one-keys-fault-stays-its-own).
 */
export const MAX_OPEN_CONNECTIONS = 256;

export interface ClickHouseHandle {
  readonly client: ClickHouseClient;
  readonly backend: 'server' | 'embedded';
  /** Where it points, without credentials: a URL or `embedded:<path>`. */
  readonly target: string;
  close(): Promise<void>;
}

/**
 * The one factory for ClickHouse clients. Both backends are `@clickhouse/client`;
 * the embedded one plugs chdb's in-process engine in through the `connection`
 * option, so every caller runs the same SQL through the same API.
 */
export async function openClickHouse(config: ClickHouseConfig): Promise<ClickHouseHandle> {
  if (config.backend === 'embedded') return openEmbedded(config.embeddedPath);
  if (!config.url) throw new DfeError('CONFIG_INVALID', 'no ClickHouse server URL configured', { key: 'DFE_CLICKHOUSE_URL' });
  const tls = config.caCertPath ? { ca_cert: readCaCert(config.caCertPath) } : undefined;
  const client = createClient({
    url: config.url,
    username: config.username,
    password: config.password,
    request_timeout: config.requestTimeoutMs,
    // The shim is read-only (readonly=2) in production: settings are per query, never
    // session-wide, so nothing here needs write access.
    clickhouse_settings: {},
    ...(tls ? { tls } : {}),
    // DFE_CLICKHOUSE_VERIFY=false: accept any server certificate (only meaningful over https).
    ...(!config.verifyTls && config.url.startsWith('https:') ? { http_agent: await insecureAgent() } : {}),
    keep_alive: { enabled: true, idle_socket_ttl: 2_500 },
    max_open_connections: MAX_OPEN_CONNECTIONS,
    // The client's own logger writes every failed request (with a stack) to the
    // console, outside pino and its once-per-key-per-minute rate limit: during an
    // outage that floods the logs. Callers log failures themselves.
    log: { level: ClickHouseLogLevel.OFF },
  });
  return {
    client,
    backend: 'server',
    target: config.url,
    close: () => client.close(),
  };
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

async function insecureAgent() {
  const https = await import('node:https');
  return new https.Agent({ rejectUnauthorized: false, keepAlive: true, maxSockets: MAX_OPEN_CONNECTIONS });
}

/**
 * Each call opens its own connection; connections to the same path share one
 * in-process engine (libchdb allows one data directory per process, so a second
 * path is refused by chdb itself).
 */
async function openEmbedded(path: string): Promise<ClickHouseHandle> {
  let createChdbConnection: (options: { path?: string }) => unknown;
  try {
    ({ createChdbConnection } = (await import('chdb/connection')) as unknown as {
      createChdbConnection: (options: { path?: string }) => unknown;
    });
  } catch (err) {
    throw new DfeError(
      'EMBEDDED_UNAVAILABLE',
      `the embedded ClickHouse (npm package chdb) is not installed (${describeError(err)}); set DFE_CLICKHOUSE_URL to use a server`,
      { key: 'DFE_CLICKHOUSE_URL', cause: err },
    );
  }
  if (path !== ':memory:') mkdirSync(path, { recursive: true });
  const client = createClient({ connection: createChdbConnection({ path }) as never, log: CLIENT_LOG });
  return { client, backend: 'embedded', target: `embedded:${path}`, close: () => client.close() };
}
