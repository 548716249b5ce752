import { qualifiedTable } from '../clickhouse/identifiers.js';
import { RUN_STATUS, TABLES } from './names.js';

/**
 * THE due-hunt SQL (docs/tables.md#the-due-rule). The runner's gate and the shim's `backlog`
 * query both call this one builder, so they cannot drift. It implements
 * `dueDecision` in schedule/arithmetic.ts; test/coordination/due-parity.test.ts holds them equal
 * and test/coordination/due-versions.test.ts holds the collapsing of versions.
 *
 * - hunt_schedule, hunt_watermark, hunt_lease and hunt_state are collapsed per
 *   hunt with FINAL: each is a ReplacingMergeTree ordered by hunt_id alone with
 *   the write time as its version, so FINAL yields exactly the newest row per
 *   hunt — what argMax(col, version) yields, at about a third of the cost at
 *   1 M hunts, and whole rows rather than one argMax per column. Conditions on
 *   other columns are applied after FINAL (ClickHouse moves only sorting-key
 *   conditions before it), so an older row never resurfaces;
 * - hunt_run is NOT read with FINAL: a run-now fire stays owed until the
 *   watermark covers it, but FINAL would hide its `requested` row as soon as the
 *   run's `failed` row (same hunt and fire, newer) exists, so every `requested`
 *   row still stored is read (a background merge can still drop one: see
 *   docs/tables.md);
 * - a live lease and an auto-disable are tests of membership in small sets
 *   (hunts holding a live lease, disabled hunts) on the sorting key, applied
 *   while reading hunt_schedule, not joins. `use_index_for_in_with_subqueries = 0`
 *   on that read: a NOT IN set cannot narrow the primary-key ranges, and
 *   analysing the key against it was a measured ~5 % of the whole query at
 *   1 k–10 k hunts (docs/tables.md#the-due-query);
 * - tombstones (`enabled = 0`, interval 0) are dropped before any `intDiv`, so a
 *   zero interval never divides;
 * - the run-now lookup is one LEFT JOIN on the newest requested fire at or
 *   before now per hunt (`max(fire)`): "owed" (no watermark, or the watermark
 *   below the fire) holds for every later fire once it holds for one, so the
 *   newest requested fire up to now is owed whenever any is, and it is the one
 *   `dueDecision` picks. One number per hunt, no arrays and no lambda over every
 *   scheduled row; with no requests the right side is empty, and the status skip
 *   index lets hunt_run's history be skipped granule by granule;
 * - "no watermark" and "no request" are told apart from 0 by the `has_wm` and
 *   `has_req` markers, since a LEFT JOIN fills missing rows with defaults;
 * - the rows and the count are each one flat SELECT over that one FROM, the rule
 *   written once as WITH aliases (dueWith), joined with one-thread hash joins
 *   (JOIN_SETTINGS); docs/tables.md#the-due-query says what was measured, and
 *   #no-next-fire-index why there is no cheaper O(due) form, and
 *   #the-server-refreshed-count how a large fleet's backlog is read cheaply instead;
 * - `now` is the ClickHouse server clock, or a bound `{now:Int64}` in tests.
 */
export interface DueSqlOptions {
  /**
   * `server` uses ClickHouse's `now()`; `param` binds `{now:Int64}` (tests, tools);
   * `outer` reads `tick_now` from an enclosing `WITH` (only dueTickSql uses it, so
   * the rows and the count of one tick share one clock reading).
   */
  readonly now?: 'server' | 'param' | 'outer';
  /**
   * The name of a boolean from an enclosing `WITH` that gates every table read: when it is
   * false the count reads no coordination row and builds no set (only the server-refreshed
   * count uses it: backlog-refresh.ts).
   */
  readonly onlyWhen?: typeof BACKLOG_STALE;
}

/** The gate backlogCountSql defines: the newest refreshed count is too old to answer. */
export const BACKLOG_STALE = 'backlog_stale';

export type DueRow = {
  readonly hunt_id: string;
  readonly fire: number;
  /** 1 when the fire comes from a run-now request. */
  readonly requested: number;
  readonly server_now: number;
  /** The schedule the fire was computed from (hunt_schedule, the one offset source). */
  readonly interval_seconds: number;
  readonly phase_offset: number;
  /** Where the hunt's owed window starts: its watermark, 0 when it never ran (aging). */
  readonly owed_from: number;
};

const SERVER_NOW = 'toInt64(toUnixTimestamp(now()))';

function nowExpr(options: DueSqlOptions): string {
  if (options.now === 'param') return '{now:Int64}';
  if (options.now === 'outer') return 'tick_now';
  return SERVER_NOW;
}

/** Rows (hunt_id, fire, requested, server_now) of every due hunt, oldest fire first. */
export function dueRowsSql(database: string, options: DueSqlOptions = {}): string {
  return `${dueRowsUnordered(database, options)}\nORDER BY fire ASC, hunt_id ASC\n${JOIN_SETTINGS}`;
}

/**
 * The watermark and run-now joins build one hash table in one thread. The
 * default (`parallel_hash` first) splits the build of the watermark side across
 * threads and measured about a tenth more CPU at 1 M hunts, and more wall time
 * on a busy machine, for the same answer (docs/tables.md#the-due-query).
 */
const JOIN_SETTINGS = "SETTINGS join_algorithm = 'hash'";

/**
 * The due rule's expressions, over the `s` (schedule), `w` (watermark) and `r`
 * (run-now) of dueFrom: ONE place for the predicate, which the rows and the count
 * both read. They are WITH aliases of one flat SELECT, not columns of a nested
 * subquery: a level of nesting cost about 1 ms of the 10 ms the count takes at
 * 1 k–10 k hunts (docs/tables.md#the-due-query).
 *
 * `now_s` is a column (`materialize`), not a constant. ClickHouse compiles an expression to
 * machine code once it has been used three times (`min_count_to_compile_expression`), keyed
 * by the expression with its constants: with the clock as a constant every new second was a
 * new expression, so a count asked three or more times a second paid a compile of about
 * 13 ms once a second (doubling that answer) for code used until the next second. As a
 * column the expression is the same every second, compiled once and kept
 * (docs/performance.md#one-connection-where-the-tail-went).
 */
function dueWith(options: DueSqlOptions): string {
  return `WITH
  materialize(${nowExpr(options)}) AS now_s,
  intDiv(now_s, s.interval_seconds) * s.interval_seconds + s.phase_offset AS current_fire,
  if(now_s >= current_fire, current_fire, current_fire - s.interval_seconds) AS sched_fire,
  (w.has_wm = 0 OR w.watermark < sched_fire) AS sched_owed,
  r.req_fire AS req_fire,
  (r.has_req = 1 AND (w.has_wm = 0 OR w.watermark < req_fire)) AS req_owed`;
}

/** The live scheduled hunts with their newest watermark and run-now request, kept when due. */
function dueFrom(database: string, options: DueSqlOptions): string {
  const schedule = qualifiedTable(database, TABLES.schedule);
  const watermark = qualifiedTable(database, TABLES.watermark);
  const lease = qualifiedTable(database, TABLES.lease);
  const run = qualifiedTable(database, TABLES.run);
  const state = qualifiedTable(database, TABLES.state);
  const now = nowExpr(options);
  const gate = options.onlyWhen ? `${options.onlyWhen} AND ` : '';
  return `FROM (
    SELECT hunt_id, interval_seconds, phase_offset
    FROM ${schedule} FINAL
    WHERE ${gate}enabled = 1 AND interval_seconds > 0
      -- The newest lease row is live (lease_until > now): someone holds the hunt.
      AND hunt_id NOT IN (SELECT hunt_id FROM ${lease} FINAL WHERE ${gate}lease_until > ${now})
      -- Auto-disabled (docs/tables.md): the newest hunt_state row has a reason.
      AND hunt_id NOT IN (SELECT hunt_id FROM ${state} FINAL WHERE ${gate}disabled_reason != '')
    SETTINGS use_index_for_in_with_subqueries = 0
  ) AS s
  LEFT JOIN (
    SELECT hunt_id, watermark, toUInt8(1) AS has_wm
    FROM ${watermark} FINAL${options.onlyWhen ? `\n    WHERE ${options.onlyWhen}` : ''}
  ) AS w ON w.hunt_id = s.hunt_id
  LEFT JOIN (
    -- The newest fire ever requested, up to now. Whether it is still owed is the
    -- watermark's call (req_owed), not its newest status: a requested run that
    -- failed stays owed like any fire. Only requested rows are read.
    SELECT hunt_id, max(fire) AS req_fire, toUInt8(1) AS has_req
    FROM ${run}
    WHERE ${gate}status = '${RUN_STATUS.requested}' AND fire <= ${now}
    GROUP BY hunt_id
  ) AS r ON r.hunt_id = s.hunt_id
WHERE sched_owed OR req_owed`;
}

/**
 * The due rows in no particular order: what a groupArray reads, so it does not
 * pay for sorting up to a million rows it does not need in order.
 */
function dueRowsUnordered(database: string, options: DueSqlOptions): string {
  return `
${dueWith(options)}
SELECT s.hunt_id AS hunt_id, toInt64(if(sched_owed, sched_fire, req_fire)) AS fire, toUInt8(NOT sched_owed) AS requested,
  now_s AS server_now, s.interval_seconds AS interval_seconds, s.phase_offset AS phase_offset,
  -- Aging (docs/runner.md#progress): where the owed window starts, the watermark; 0 for a
  -- hunt that never ran (owed since it was added: it must not look newer at every tick).
  toInt64(if(w.has_wm = 1, w.watermark, 0)) AS owed_from
${dueFrom(database, options)}`;
}

/**
 * `value` = the number of due hunts: the shim's `backlog` query. The rows' FROM and
 * predicate, counted in the same flat SELECT (not a count() around the rows).
 */
export function dueCountSql(database: string, options: DueSqlOptions = {}): string {
  // Gated, the count says whether its gate let it read (`ran`), so its reader never takes
  // the 0 of a count that read nothing for a real one.
  const ran = options.onlyWhen ? `, toUInt8(${options.onlyWhen}) AS ran` : '';
  return `
${dueWith(options)}
SELECT count() AS value${ran}
${dueFrom(database, options)}
${JOIN_SETTINGS}`;
}

/** One row: the tick's clock, the shim's backlog count and the gate's due rows. */
export type DueTickRow = {
  readonly server_now: number | string;
  readonly backlog: number | string;
  /** [hunt_id, fire, requested, interval_seconds, phase_offset, owed_from] per due hunt, in no particular order. */
  readonly due: ReadonlyArray<readonly [string, number | string, number | string, number | string, number | string, number | string]>;
};

/**
 * The runner's one due query per tick (docs/runner.md#a-tick, step 1): the gate's due rows
 * (dueRowsSql) and the shim's backlog (dueCountSql) side by side, evaluated at
 * ONE clock reading and in one pipeline, so a tick can record that the two
 * agree. `now()` is read once in the WITH: ClickHouse evaluates `now()` afresh
 * in each scalar subquery, so two separate readings could straddle a second.
 * Both sides are FROM-subqueries (aggregates without GROUP BY, one row each),
 * never scalar subqueries, which ClickHouse would run one after the other.
 */
export function dueTickSql(database: string, options: { readonly now?: 'server' | 'param' } = {}): string {
  const tickNow = options.now === 'param' ? '{now:Int64}' : SERVER_NOW;
  const outer: DueSqlOptions = { now: 'outer' };
  return `
WITH ${tickNow} AS tick_now
SELECT tick_now AS server_now, c.value AS backlog, d.due AS due
FROM (${dueCountSql(database, outer)}
) AS c
CROSS JOIN (
  SELECT groupArray(tuple(hunt_id, fire, requested, interval_seconds, phase_offset, owed_from)) AS due FROM (${dueRowsUnordered(database, outer)}
  ${JOIN_SETTINGS}
  )
) AS d`;
}
