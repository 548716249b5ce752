import { qualifiedTable, quoteDatabase } from '../clickhouse/identifiers.js';

/**
 * The coordination tables (docs/tables.md#the-tables): same names, columns and engines as the
 * original, so both can share a cluster. Defined once; topology.ts applies them,
 * due-sql.ts and the runner read and write them.
 */
export const TABLES = Object.freeze({
  schedule: 'hunt_schedule',
  lease: 'hunt_lease',
  watermark: 'hunt_watermark',
  state: 'hunt_state',
  run: 'hunt_run',
  heartbeat: 'hunt_runner_heartbeat',
});

/** hunt_run.status values. `requested` rows are run-now requests (docs/tables.md#run-now). */
export const RUN_STATUS = Object.freeze({
  requested: 'requested',
  succeeded: 'succeeded',
  failed: 'failed',
});

interface TableDef {
  readonly name: string;
  readonly columns: string;
  readonly version: string;
  readonly orderBy: string;
  readonly ttl?: string;
}

const UPDATED = 'updated DateTime64(3) DEFAULT now64(3)';

export const TABLE_DEFS: readonly TableDef[] = Object.freeze([
  {
    name: TABLES.schedule,
    columns: `hunt_id String, interval_seconds Int64, phase_offset Int64, enabled UInt8 DEFAULT 1, ${UPDATED}`,
    version: 'updated',
    orderBy: 'hunt_id',
  },
  {
    name: TABLES.lease,
    columns: 'hunt_id String, owner String, fire Int64, lease_until Int64, claimed DateTime64(3) DEFAULT now64(3)',
    version: 'claimed',
    orderBy: 'hunt_id',
  },
  { name: TABLES.watermark, columns: `hunt_id String, watermark Int64, ${UPDATED}`, version: 'updated', orderBy: 'hunt_id' },
  {
    name: TABLES.state,
    columns: `hunt_id String, overrun_count Int64, too_aggressive UInt8, ${UPDATED}`,
    version: 'updated',
    orderBy: 'hunt_id',
  },
  {
    name: TABLES.run,
    columns: `hunt_id String, fire Int64, status String, rows_written Int64, ${UPDATED}`,
    version: 'updated',
    orderBy: '(hunt_id, fire)',
  },
  {
    name: TABLES.heartbeat,
    columns: `runner_id String, seen Int64, poll_seconds Float64, ${UPDATED}`,
    version: 'updated',
    orderBy: 'runner_id',
    ttl: 'toDateTime(updated) + INTERVAL 7 DAY',
  },
]);

/** How the tables are created (docs/tables.md#topology). */
export type ResolvedTopology =
  | { readonly kind: 'single' }
  | { readonly kind: 'replicated-database' }
  | { readonly kind: 'cluster'; readonly cluster: string };

function engine(def: TableDef, topology: ResolvedTopology): string {
  switch (topology.kind) {
    case 'single':
      return `ReplacingMergeTree(${def.version})`;
    case 'replicated-database':
      // A Replicated database supplies the ZooKeeper path and replica name itself.
      return `ReplicatedReplacingMergeTree(${def.version})`;
    case 'cluster':
      return `ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ${def.version})`;
  }
}

function onCluster(topology: ResolvedTopology): string {
  return topology.kind === 'cluster' ? ` ON CLUSTER '${topology.cluster.replace(/'/g, '')}'` : '';
}

export function createDatabaseDdl(database: string, topology: ResolvedTopology): string {
  return `CREATE DATABASE IF NOT EXISTS ${quoteDatabase(database)}${onCluster(topology)}`;
}

export function createTableDdl(database: string, def: TableDef, topology: ResolvedTopology): string {
  const ttl = def.ttl ? ` TTL ${def.ttl}` : '';
  return (
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, def.name)}${onCluster(topology)} (${def.columns}) ` +
    `ENGINE = ${engine(def, topology)} ORDER BY ${def.orderBy}${ttl}`
  );
}

/** Every statement `schema --apply` runs, in order; each is idempotent. */
export function schemaDdl(database: string, topology: ResolvedTopology): string[] {
  return [createDatabaseDdl(database, topology), ...TABLE_DEFS.map((def) => createTableDdl(database, def, topology))];
}
