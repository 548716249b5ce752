import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig, type ClickHouseConfig } from '../../src/config/load.js';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';

/**
 * A real ClickHouse for a test file: a server when DFE_CLICKHOUSE_URL is set,
 * else the embedded engine in a fresh directory for this process. Each call
 * makes a uniquely named database, so files and tests stay independent.
 *
 * Where a Docker engine answers, test/global-setup.ts calls
 * `startClickHouseContainer()` once per run: a modern ClickHouse server in a
 * container (@testcontainers/clickhouse), exported as DFE_CLICKHOUSE_URL so every
 * server-mode path below uses it. Where none answers it prints one line and the
 * run stays on the embedded engine (or the DFE_CLICKHOUSE_URL given).
 */
let embeddedDir: string | undefined;

export function embeddedPathForThisProcess(): string {
  embeddedDir ??= mkdtempSync(join(tmpdir(), 'dfe-test-ch-'));
  return embeddedDir;
}

export function testClickHouseConfig(database: string): ClickHouseConfig {
  const env = { ...process.env, DFE_CLICKHOUSE_DATA_DATABASE: database, DFE_EMBEDDED_PATH: embeddedPathForThisProcess() };
  return loadConfig(env).clickhouse;
}

export interface TestDatabase {
  readonly handle: ClickHouseHandle;
  readonly database: string;
  readonly config: ClickHouseConfig;
  close(): Promise<void>;
}

export function uniqueDatabaseName(prefix = 't'): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export async function openTestDatabase(prefix = 't'): Promise<TestDatabase> {
  const database = uniqueDatabaseName(prefix);
  return openDatabase(database, testClickHouseConfig(database));
}

/** Opens `config`, creates `database` in it; `close` drops it (`SYNC`: KeeperMap tables let go of their Keeper paths first). */
export async function openDatabase(database: string, config: ClickHouseConfig, options: { readonly dropSync?: boolean } = {}): Promise<TestDatabase> {
  const handle = await openClickHouse(config);
  await handle.client.command({ query: `CREATE DATABASE IF NOT EXISTS \`${database}\`` });
  const drop = `DROP DATABASE IF EXISTS \`${database}\`${options.dropSync ? ' SYNC' : ''}`;
  return {
    handle,
    database,
    config,
    async close() {
      try {
        await handle.client.command({ query: drop });
      } finally {
        await handle.close();
      }
    },
  };
}

export async function queryRows<T>(db: TestDatabase, query: string, params: Record<string, unknown> = {}): Promise<T[]> {
  const rs = await db.handle.client.query({ query, query_params: params, format: 'JSONEachRow' });
  return rs.json<T>();
}

/** The server image the container path runs (a current LTS line). */
export const CLICKHOUSE_IMAGE = 'clickhouse/clickhouse-server:25.8';

export type TestBackend =
  | { readonly kind: 'container'; readonly url: string; stop(): Promise<void> }
  | { readonly kind: 'as-configured'; readonly reason: string };

/**
 * Starts a ClickHouse container when a Docker engine answers and no server was given; sets
 * DFE_CLICKHOUSE_URL (credentials in it) for the test processes forked after it. The
 * testcontainers library is imported only when a Docker socket or DOCKER_HOST exists.
 * Never throws: whatever fails, the run goes on as configured, and one line says why.
 */
export async function startClickHouseContainer(env: NodeJS.ProcessEnv = process.env): Promise<TestBackend> {
  const asConfigured = (why: string): TestBackend => {
    const target = env.DFE_CLICKHOUSE_URL ? 'the server in DFE_CLICKHOUSE_URL' : 'the embedded engine (chdb)';
    const reason = `${why}: ClickHouse tests use ${target}`;
    console.info(`[clickhouse] ${reason}`);
    return { kind: 'as-configured', reason };
  };
  if (env.DFE_CLICKHOUSE_URL) return asConfigured('DFE_CLICKHOUSE_URL is set');
  if (env.DFE_TEST_TESTCONTAINERS === '0') return asConfigured('DFE_TEST_TESTCONTAINERS=0');
  if (!env.DOCKER_HOST && !existsSync('/var/run/docker.sock')) return asConfigured('no Docker engine (no DOCKER_HOST, no /var/run/docker.sock)');
  try {
    const { ClickHouseContainer } = await import('@testcontainers/clickhouse');
    const container = await new ClickHouseContainer(CLICKHOUSE_IMAGE).start();
    const url = new URL(container.getHttpUrl());
    url.username = container.getUsername();
    url.password = container.getPassword();
    env.DFE_CLICKHOUSE_URL = url.href.replace(/\/$/, '');
    console.info(`[clickhouse] ClickHouse tests use a ${CLICKHOUSE_IMAGE} container at ${container.getHttpUrl()}`);
    return {
      kind: 'container',
      url: env.DFE_CLICKHOUSE_URL,
      async stop() {
        delete env.DFE_CLICKHOUSE_URL;
        await container.stop();
      },
    };
  } catch (err) {
    return asConfigured(`no Docker engine answers (${(err as Error).message.split('\n')[0]})`);
  }
}
