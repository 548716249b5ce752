import { mkdtempSync } from 'node:fs';
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
 * There is no Docker engine on the machines this project is built on, so the
 * testcontainers path is not wired; `dockerAvailable()` says so when asked.
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
  const config = testClickHouseConfig(database);
  const handle = await openClickHouse(config);
  await handle.client.command({ query: `CREATE DATABASE IF NOT EXISTS \`${database}\`` });
  return {
    handle,
    database,
    config,
    async close() {
      try {
        await handle.client.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
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
