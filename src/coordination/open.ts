import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import type { AppConfig } from '../config/load.js';
import type { ResolvedTopology } from './tables.js';
import { coordinationSettings, resolveTopology, type CoordinationSettings } from './topology.js';

/** An open ClickHouse with the coordination tables' topology resolved, for one command. */
export interface CoordinationScope {
  readonly handle: ClickHouseHandle;
  readonly topology: ResolvedTopology;
  readonly settings: CoordinationSettings;
}

/** Opens ClickHouse, resolves the topology, runs `fn` and closes, whatever `fn` did. */
export async function withCoordination<T>(config: AppConfig, fn: (scope: CoordinationScope) => Promise<T>): Promise<T> {
  const handle = await openClickHouse(config.clickhouse);
  try {
    const topology = await resolveTopology(handle.client, config.clickhouse);
    return await fn({ handle, topology, settings: coordinationSettings(topology) });
  } finally {
    await handle.close();
  }
}
