import { qualifiedTable, quoteDatabase } from '../clickhouse/identifiers.js';
import { TABLES } from './names.js';

export { RUN_STATUS, TABLES } from './names.js';

/**
 * A column this project adds to an original table (docs/tables.md).
 * New tables get it in CREATE; a table the original created gets it from
 * `ALTER TABLE … ADD COLUMN IF NOT EXISTS`, and its old rows read the default.
 */
export interface AddedColumn {
  readonly name: string;
  readonly type: string;
  /** A constant SQL default, so old rows read back a known value. */
  readonly default: string;
}

/** A data-skipping index this project adds (CREATE, or `ADD INDEX IF NOT EXISTS`). */
export interface AddedIndex {
  readonly name: string;
  readonly expr: string;
  readonly type: string;
  readonly granularity: number;
}

/** Settings the DDL depends on (docs/tables.md); the process's ClickHouseConfig carries them under these names. */
export interface SchemaOptions {
  /** hunt_run TTL in days (`DFE_HUNT_RUN_RETENTION_DAYS`). */
  readonly runRetentionDays: number;
  /** Seconds between the server's recounts of the backlog, 0: off (`DFE_BACKLOG_REFRESH_SECONDS`). */
  readonly backlogRefreshSeconds: number;
}

export const DEFAULT_SCHEMA_OPTIONS: SchemaOptions = Object.freeze({ runRetentionDays: 90, backlogRefreshSeconds: 0 });

export interface TableDef {
  readonly name: string;
  /** The original's columns, exactly as it creates them. */
  readonly columns: string;
  /** Columns added since, in order; always appended after `columns`. */
  readonly added?: readonly AddedColumn[];
  readonly indexes?: readonly AddedIndex[];
  readonly version: string;
  readonly orderBy: string;
  /** The original's TTL, part of CREATE only. */
  readonly ttl?: string;
  /**
   * A TTL this project sets, from settings: in CREATE, and by `MODIFY TTL` on a
   * table whose TTL differs (the original's hunt_run has none).
   */
  readonly managedTtl?: (options: SchemaOptions) => string;
}

function columnDdl(c: AddedColumn): string {
  return `${c.name} ${c.type} DEFAULT ${c.default}`;
}

function indexDdl(i: AddedIndex): string {
  return `INDEX ${i.name} ${i.expr} TYPE ${i.type} GRANULARITY ${i.granularity}`;
}

/** Every column (and index) of a table as CREATE writes it: the original's, then the added ones. */
export function allColumns(def: TableDef): string {
  return [def.columns, ...(def.added ?? []).map(columnDdl), ...(def.indexes ?? []).map(indexDdl)].join(', ');
}

/**
 * hunt_run's retention, written the way the server renders it back in
 * system.tables (`toIntervalDay(n)`), so applySchema can tell it is already set.
 */
export function runTtl(options: SchemaOptions): string {
  const days = options.runRetentionDays;
  if (!Number.isSafeInteger(days) || days < 1) throw new RangeError(`runRetentionDays must be a whole number ≥ 1, got ${days}`);
  return `toDateTime(updated) + toIntervalDay(${days})`;
}

const UPDATED = 'updated DateTime64(3) DEFAULT now64(3)';

/**
 * A table holding one current row per hunt: ordered by hunt_id alone and versioned
 * by `updated`, so FINAL (or a merge) keeps each hunt's newest row — what the due
 * query relies on (docs/tables.md#the-due-query). `columns` are the original's
 * between `hunt_id` and `updated`.
 */
function perHuntTable(name: string, columns: string, added?: readonly AddedColumn[]): TableDef {
  return { name, columns: `hunt_id String, ${columns}, ${UPDATED}`, ...(added ? { added } : {}), version: 'updated', orderBy: 'hunt_id' };
}

export const TABLE_DEFS: readonly TableDef[] = Object.freeze([
  // Load smoothing (docs/tables.md): where phase_offset came from and when it last moved.
  perHuntTable(TABLES.schedule, 'interval_seconds Int64, phase_offset Int64, enabled UInt8 DEFAULT 1', [
    { name: 'offset_source', type: 'LowCardinality(String)', default: "'hash'" },
    { name: 'moved_at', type: 'DateTime64(3)', default: '0' },
  ]),
  {
    name: TABLES.lease,
    columns: 'hunt_id String, owner String, fire Int64, lease_until Int64, claimed DateTime64(3) DEFAULT now64(3)',
    version: 'claimed',
    orderBy: 'hunt_id',
  },
  perHuntTable(TABLES.watermark, 'watermark Int64'),
  // Auto-disable (docs/tables.md): a non-empty reason on the newest row keeps the hunt from being due.
  perHuntTable(TABLES.state, 'overrun_count Int64, too_aggressive UInt8', [
    { name: 'disabled_reason', type: 'String', default: "''" },
    { name: 'disabled_at', type: 'DateTime64(3)', default: '0' },
  ]),
  {
    name: TABLES.run,
    columns: `hunt_id String, fire Int64, status String, rows_written Int64, ${UPDATED}`,
    // Per-run cost (docs/tables.md), 0 where the server's summary did not carry it.
    added: [
      { name: 'duration_ms', type: 'Int64', default: '0' },
      { name: 'cpu_us', type: 'Int64', default: '0' },
      { name: 'memory_bytes', type: 'Int64', default: '0' },
      { name: 'error_code', type: 'Int32', default: '0' },
      // Bounded catch-up (docs/hunts.md#catch-up): the range this run left out, 0/0 when none.
      { name: 'skipped_from', type: 'Int64', default: '0' },
      { name: 'skipped_to', type: 'Int64', default: '0' },
    ],
    // The due query reads only `requested` rows; granules without one are skipped,
    // so reading hunt_run costs next to nothing when there are no requests.
    indexes: [{ name: 'status_set', expr: 'status', type: 'set(8)', granularity: 1 }],
    version: 'updated',
    orderBy: '(hunt_id, fire)',
    managedTtl: runTtl,
  },
  {
    name: TABLES.heartbeat,
    columns: `runner_id String, seen Int64, poll_seconds Float64, ${UPDATED}`,
    version: 'updated',
    orderBy: 'runner_id',
    ttl: 'toDateTime(updated) + INTERVAL 7 DAY',
  },
  // This project's own: one row per key, the newest by `updated` wins (e.g. ('claims', 'keeper')).
  { name: TABLES.coordination, columns: `key String, value String, ${UPDATED}`, version: 'updated', orderBy: 'key' },
]);

/**
 * The KeeperMap table's `keys_limit`: at most three keys per hunt (its lease, the record of
 * the fire in flight, the record of the last successful fire), so room for 33 000 hunts
 * (docs/claim-protocol.md#keeper-mode).
 */
export const KEEPER_KEYS_LIMIT = 100_000;

/**
 * `hunt_claim`: Keeper-mode claims (docs/claim-protocol.md#keeper-mode). The Keeper path is
 * under the server's `keeper_map_path_prefix`, one per data database, so every replica
 * that creates it shares its keys. Fails where KeeperMap does not work: that is the probe.
 */
export function keeperClaimTableDdl(database: string, topology: ResolvedTopology): string {
  const path = `/dfe_coordination/${database.replace(/[^A-Za-z0-9_-]/g, '')}/${TABLES.claim}`;
  return (
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, TABLES.claim)}${onCluster(topology)} ` +
    `(claim_key String, hunt_id String, fire Int64, owner String, token String, lease_until Int64, claimed DateTime64(3) DEFAULT now64(3)) ` +
    `ENGINE = KeeperMap('${path}', ${KEEPER_KEYS_LIMIT}) PRIMARY KEY claim_key`
  );
}

/** How the tables are created (docs/tables.md#topology). */
export type ResolvedTopology =
  | { readonly kind: 'single' }
  | { readonly kind: 'replicated-database' }
  | { readonly kind: 'cluster'; readonly cluster: string };

/** Replication path and replica name of the coordination tables on a macro-configured cluster. */
export const CLUSTER_ZK_PATH = '/clickhouse/tables/dfe_coordination/{database}/{table}';
export const CLUSTER_REPLICA_NAME = '{shard}-{replica}';

function engine(def: TableDef, topology: ResolvedTopology): string {
  switch (topology.kind) {
    case 'single':
      return `ReplacingMergeTree(${def.version})`;
    case 'replicated-database':
      // A Replicated database supplies the ZooKeeper path and replica name itself.
      return `ReplicatedReplacingMergeTree(${def.version})`;
    case 'cluster':
      // ONE replication group across the whole cluster (docs/tables.md#topology):
      // no {shard} in the path, so every replica of every shard holds the same
      // coordination rows; the replica name must then be unique cluster-wide,
      // which {replica} alone need not be (r1 on every shard), so it is {shard}-{replica}.
      return `ReplicatedReplacingMergeTree('${CLUSTER_ZK_PATH}', '${CLUSTER_REPLICA_NAME}', ${def.version})`;
  }
}

export function onCluster(topology: ResolvedTopology): string {
  return topology.kind === 'cluster' ? ` ON CLUSTER '${topology.cluster.replace(/'/g, '')}'` : '';
}

export function createDatabaseDdl(database: string, topology: ResolvedTopology): string {
  return `CREATE DATABASE IF NOT EXISTS ${quoteDatabase(database)}${onCluster(topology)}`;
}

export function createTableDdl(
  database: string,
  def: TableDef,
  topology: ResolvedTopology,
  options: SchemaOptions = DEFAULT_SCHEMA_OPTIONS,
): string {
  const ttlExpr = def.managedTtl?.(options) ?? def.ttl;
  const ttl = ttlExpr ? ` TTL ${ttlExpr}` : '';
  return (
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, def.name)}${onCluster(topology)} (${allColumns(def)}) ` +
    `ENGINE = ${engine(def, topology)} ORDER BY ${def.orderBy}${ttl}`
  );
}

/**
 * Brings a table the original created up to date: one `ADD COLUMN IF NOT EXISTS`
 * per added column and `ADD INDEX IF NOT EXISTS` per added index, in one ALTER
 * (none when the table adds nothing). A no-op on a table CREATE just made or a
 * second run. An added index covers parts written from then on; older parts are
 * read whole until merges rewrite them or the TTL drops them.
 */
export function addColumnsDdl(database: string, def: TableDef, topology: ResolvedTopology): string | undefined {
  const adds = [
    ...(def.added ?? []).map((c) => `ADD COLUMN IF NOT EXISTS ${columnDdl(c)}`),
    ...(def.indexes ?? []).map((i) => `ADD ${indexDdl(i).replace(/^INDEX /, 'INDEX IF NOT EXISTS ')}`),
  ];
  if (!adds.length) return undefined;
  return `ALTER TABLE ${qualifiedTable(database, def.name)}${onCluster(topology)} ${adds.join(', ')}`;
}

/** One step of `schema --apply`. */
export interface SchemaStep {
  readonly query: string;
  /**
   * Set on a `MODIFY TTL`: the table and TTL it sets. MODIFY TTL rewrites the
   * table's parts, so applySchema runs it only when the table's TTL differs.
   */
  readonly ttl?: { readonly table: string; readonly expr: string };
  /**
   * Run only when the named object exists, and (with `unlessComment`) its comment in
   * system.tables is not that one: a drop that needs no grant where there is nothing to drop,
   * or an object made from a definition that changed (docs/tables.md#the-server-refreshed-count).
   */
  readonly onlyIfExists?: { readonly table: string; readonly unlessComment?: string };
  /** Set on a step a setting asks for: a failure names the setting and its value. */
  readonly setting?: { readonly key: string; readonly value: number; readonly needs: string };
}

/** The coordination tables' steps; src/coordination/schema.ts adds the backlog's. */
export function tableSchemaSteps(database: string, topology: ResolvedTopology, options: SchemaOptions = DEFAULT_SCHEMA_OPTIONS): SchemaStep[] {
  const steps: SchemaStep[] = [{ query: createDatabaseDdl(database, topology) }];
  for (const def of TABLE_DEFS) {
    steps.push({ query: createTableDdl(database, def, topology, options) });
    const alter = addColumnsDdl(database, def, topology);
    if (alter) steps.push({ query: alter });
    if (def.managedTtl) {
      const expr = def.managedTtl(options);
      steps.push({
        query: `ALTER TABLE ${qualifiedTable(database, def.name)}${onCluster(topology)} MODIFY TTL ${expr}`,
        ttl: { table: def.name, expr },
      });
    }
  }
  return steps;
}
