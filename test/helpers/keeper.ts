import { resolve } from 'node:path';
import { loadConfig, type ClickHouseConfig } from '../../src/config/load.js';
import { embeddedPathForThisProcess, openDatabase, uniqueDatabaseName, type TestDatabase } from './clickhouse.js';

/**
 * The embedded engine with the shipped Keeper config (examples/embedded-keeper.xml:
 * testkeeper + keeper_map_path_prefix), so KeeperMap works in-process. Always the
 * embedded engine, even where DFE_CLICKHOUSE_URL names a server without Keeper.
 * A test file that uses it opens every embedded connection with this config (the
 * engine takes its config from the first connection of the process).
 */
export const KEEPER_CONFIG_FILE = resolve('examples/embedded-keeper.xml');

export function keeperEnv(database: string): Record<string, string> {
  return {
    DFE_CLICKHOUSE_BACKEND: 'embedded',
    DFE_CLICKHOUSE_DATA_DATABASE: database,
    DFE_EMBEDDED_PATH: embeddedPathForThisProcess(),
    DFE_EMBEDDED_CONFIG_FILE: KEEPER_CONFIG_FILE,
    DFE_CLICKHOUSE_TOPOLOGY: 'single',
    LOG_LEVEL: 'silent',
  };
}

export function keeperClickHouseConfig(database: string): ClickHouseConfig {
  return loadConfig(keeperEnv(database)).clickhouse;
}

export async function openKeeperDatabase(prefix: string): Promise<TestDatabase> {
  const database = uniqueDatabaseName(prefix);
  return openDatabase(database, keeperClickHouseConfig(database), { dropSync: true });
}
