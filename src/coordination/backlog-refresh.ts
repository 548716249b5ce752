import { createHash } from 'node:crypto';
import { qualifiedTable } from '../clickhouse/identifiers.js';
import { BACKLOG_REFRESH_MAX_SECONDS } from '../config/schema.js';
import { BACKLOG_STALE, dueCountSql } from './due-sql.js';
import { TABLES } from './names.js';
import { onCluster, type ResolvedTopology, type SchemaStep } from './tables.js';

/**
 * The server-refreshed count (docs/tables.md#the-server-refreshed-count). With
 * `DFE_BACKLOG_REFRESH_SECONDS` > 0 the server itself runs THE due count (dueCountSql, the
 * one builder) every that many seconds and appends it to `hunt_backlog`, and the shim's
 * `backlog` answers the newest count while it is fresh, instead of passing over every
 * scheduled hunt on each poll. A count older than BACKLOG_FRESH_REFRESHES refreshes (or
 * none) is not used: the shim then asks the due query itself, so a stopped view, a server
 * that cannot refresh or a mismatched setting costs time, never a wrong zero.
 */

/** The setting, named in errors. */
export const BACKLOG_REFRESH_KEY = 'DFE_BACKLOG_REFRESH_SECONDS';

/** How many refresh periods the newest count stays usable: one late refresh does not fall back. */
export const BACKLOG_FRESH_REFRESHES = 3;

/** How long the rows of hunt_backlog are kept: they are a short history, only the newest is read. */
const BACKLOG_KEEP = 'INTERVAL 1 DAY';

function checkedSeconds(seconds: number): number {
  if (!Number.isSafeInteger(seconds) || seconds < 0 || seconds > BACKLOG_REFRESH_MAX_SECONDS) {
    throw new RangeError(`backlogRefreshSeconds must be a whole number from 0 to ${BACKLOG_REFRESH_MAX_SECONDS}, got ${seconds}`);
  }
  return seconds;
}

/**
 * hunt_backlog: one row per refresh. Created in every schema, whatever the setting, so the
 * shim's read never meets a missing table. Not a ReplacingMergeTree: rows are never
 * collapsed, the newest is read. In a Replicated database the server runs each refresh on
 * one replica, so the table is replicated there; elsewhere each server refreshes its own.
 */
export function backlogTableDdl(database: string, topology: ResolvedTopology): string {
  const engine = topology.kind === 'replicated-database' ? 'ReplicatedMergeTree' : 'MergeTree';
  return (
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, TABLES.backlog)}${onCluster(topology)} ` +
    `(computed_at DateTime64(3), value UInt64) ENGINE = ${engine} ORDER BY computed_at ` +
    `TTL toDateTime(computed_at) + ${BACKLOG_KEEP}`
  );
}

/** The view's definition without its comment: what the comment's digest is taken of. */
function backlogViewBody(database: string, topology: ResolvedTopology, seconds: number): string {
  return (
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${qualifiedTable(database, TABLES.backlogRefresh)}${onCluster(topology)} ` +
    `REFRESH EVERY ${checkedSeconds(seconds)} SECOND APPEND TO ${qualifiedTable(database, TABLES.backlog)} ` +
    `(computed_at DateTime64(3), value UInt64)`
  );
}

function backlogViewSelect(database: string): string {
  // now64(3) and the count's now() are one reading: both are the refresh query's start.
  return `SELECT now64(3) AS computed_at, toUInt64(value) AS value FROM (${dueCountSql(database)}\n)`;
}

/**
 * The comment the view is created with: a digest of its whole definition, so a schema step
 * can tell a view made by another setting or another version of the due SQL, and replace it.
 */
export function backlogViewComment(database: string, topology: ResolvedTopology, seconds: number): string {
  const digest = createHash('sha256').update(`${backlogViewBody(database, topology, seconds)}\n${backlogViewSelect(database)}`).digest('hex');
  return `dfe backlog ${digest.slice(0, 16)}`;
}

export function backlogViewDdl(database: string, topology: ResolvedTopology, seconds: number): string {
  return (
    `${backlogViewBody(database, topology, seconds)} ` +
    `COMMENT '${backlogViewComment(database, topology, seconds)}' AS ${backlogViewSelect(database)}`
  );
}

function dropViewDdl(database: string, topology: ResolvedTopology): string {
  return `DROP VIEW IF EXISTS ${qualifiedTable(database, TABLES.backlogRefresh)}${onCluster(topology)}`;
}

/**
 * The backlog's schema steps: the table always; with a refresh period, the view (a view of
 * another definition is dropped first, so it is made anew); with 0, no view (one there is dropped).
 */
export function backlogSchemaSteps(database: string, topology: ResolvedTopology, seconds: number): SchemaStep[] {
  const steps: SchemaStep[] = [{ query: backlogTableDdl(database, topology) }];
  // The drop runs only where a view is there to drop, so a user without DROP VIEW (the refresh
  // never on) applies the schema as before.
  if (checkedSeconds(seconds) === 0) return [...steps, { query: dropViewDdl(database, topology), onlyIfExists: { table: TABLES.backlogRefresh } }];
  const comment = backlogViewComment(database, topology, seconds);
  return [
    ...steps,
    { query: dropViewDdl(database, topology), onlyIfExists: { table: TABLES.backlogRefresh, unlessComment: comment } },
    {
      query: backlogViewDdl(database, topology, seconds),
      setting: { key: BACKLOG_REFRESH_KEY, value: seconds, needs: 'a refreshable materialized view (ClickHouse 24.10 or newer, and CREATE VIEW)' },
    },
  ];
}

/**
 * The shim's `backlog` (catalogue built-in `hunt_backlog`): with the refresh off, THE due
 * count itself; with it on, the newest refreshed count while it is younger than
 * BACKLOG_FRESH_REFRESHES periods, else the due count. The due count is gated on that age
 * test (DueSqlOptions.onlyWhen): while the refreshed count is fresh it reads no coordination
 * row and builds no set. It reports whether it ran, and that, not a second reading of the
 * age, picks the answer, so a refresh landing mid-query can never turn its empty count into
 * a 0 (docs/tables.md#the-server-refreshed-count).
 */
export function backlogCountSql(database: string, refreshSeconds: number): string {
  if (checkedSeconds(refreshSeconds) === 0) return dueCountSql(database);
  return `
WITH (SELECT (max(computed_at), argMax(value, computed_at)) FROM ${qualifiedTable(database, TABLES.backlog)}) AS newest,
  newest.1 < now64(3) - INTERVAL ${refreshSeconds * BACKLOG_FRESH_REFRESHES} SECOND AS ${BACKLOG_STALE}
SELECT if(due.ran = 1, due.value, newest.2) AS value
FROM (${dueCountSql(database, { onlyWhen: BACKLOG_STALE })}
) AS due`;
}
