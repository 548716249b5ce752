import { BACKLOG_FRESH_REFRESHES, BACKLOG_REFRESH_KEY, backlogViewComment } from '../coordination/backlog-refresh.js';
import { qualifiedTable } from '../clickhouse/identifiers.js';
import { TABLES } from '../coordination/tables.js';
import { guarded, rows, type DoctorContext } from './context.js';
import type { CheckResult } from './report.js';

/**
 * The server-refreshed count (docs/tables.md#the-server-refreshed-count), as the doctor sees
 * it: with DFE_BACKLOG_REFRESH_SECONDS > 0, whether the refreshable view exists, how its last
 * refresh went (`system.view_refreshes`) and how old the newest count in hunt_backlog is. A
 * count the shim would not use (none, or older than BACKLOG_FRESH_REFRESHES periods) is a
 * warning, not a failure: the shim then runs the exact due query itself, slower but never
 * wrong. With 0, a view left over from an earlier setting is a warning.
 */

const APPLY_SCHEMA = 'run `dfe-hunt-runner schema --apply` with the runner\'s user (the chart\'s materialise Job does)';
const FALLBACK = 'so the shim falls back to the exact due query on every poll (slower, never wrong)';

interface BacklogObject {
  readonly name: string;
  readonly comment: string;
}

interface Refresh {
  readonly status: string;
  readonly last_success_time: string | null;
  readonly exception: string;
}

interface Newest {
  readonly n: number | string;
  readonly value: number | string;
  readonly at: string;
  readonly age_ms: number | string;
}

/** An exception's first line, at most 300 characters: the report is a table. */
function firstLine(text: string): string {
  const line = text.trim().split('\n')[0] ?? '';
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function backlogRefresh(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'backlog refresh';
  const period = ctx.config.clickhouse.backlogRefreshSeconds;
  const setting = `${BACKLOG_REFRESH_KEY}=${period}`;
  const view = `${ctx.database}.${TABLES.backlogRefresh}`;
  return guarded(name, APPLY_SCHEMA, async () => {
    const objects = await rows<BacklogObject>(
      ctx,
      'SELECT name, comment FROM system.tables WHERE database = {db:String} AND has({names:Array(String)}, name)',
      { db: ctx.database, names: [TABLES.backlog, TABLES.backlogRefresh] },
    );
    const found = new Map(objects.map((o) => [o.name, o]));
    const refresher = found.get(TABLES.backlogRefresh);
    if (period === 0) {
      if (!refresher) return { name, status: 'ok', detail: `off (${setting}): the shim's backlog is the exact due query` };
      return {
        name,
        status: 'warn',
        detail: `${setting}, but ${view} exists: the schema step has not run since the setting was turned off (it drops the view), so the server still runs the due count every refresh for nothing`,
        fix: `${APPLY_SCHEMA}; if the shim runs with ${BACKLOG_REFRESH_KEY} > 0, give this program the same value instead`,
      };
    }
    if (!found.has(TABLES.backlog)) {
      return { name, status: 'fail', detail: `${setting}, but ${ctx.database}.${TABLES.backlog} is missing: the shim's backlog query reads it and fails`, fix: APPLY_SCHEMA };
    }
    const setView = `${APPLY_SCHEMA}, with ${setting} (a refreshable view: ClickHouse 24.10 or newer, and CREATE VIEW, DROP VIEW on ${ctx.database}.*)`;
    if (!refresher) {
      return { name, status: 'warn', detail: `${setting}, but there is no view ${view}: nothing refreshes the count, ${FALLBACK}`, fix: setView };
    }
    const [refresh] = await rows<Refresh>(
      ctx,
      'SELECT status, toString(last_success_time) AS last_success_time, exception FROM system.view_refreshes WHERE database = {db:String} AND view = {view:String}',
      { db: ctx.database, view: TABLES.backlogRefresh },
    );
    const [newest] = await rows<Newest>(
      ctx,
      `SELECT count() AS n, argMax(value, computed_at) AS value, toString(max(computed_at)) AS at,
  toUnixTimestamp64Milli(now64(3)) - toUnixTimestamp64Milli(max(computed_at)) AS age_ms
FROM ${qualifiedTable(ctx.database, TABLES.backlog)}`,
    );
    const freshMs = period * BACKLOG_FRESH_REFRESHES * 1000;
    const count = Number(newest?.n ?? 0);
    const ageMs = Number(newest?.age_ms ?? 0);
    const stale = count === 0 || ageMs > freshMs;
    const state = refresh
      ? `view ${refresh.status}, last success ${refresh.last_success_time ?? 'never'}`
      : 'no row in system.view_refreshes';
    const problems: string[] = [];
    if (!refresh) problems.push(`${view} has no row in system.view_refreshes (not a refreshable view?)`);
    if (refresh && refresh.exception !== '') problems.push(`its last refresh failed: ${firstLine(refresh.exception)}`);
    if (ctx.topology && refresher.comment !== backlogViewComment(ctx.database, ctx.topology, period)) {
      problems.push(`${view} was made by another ${BACKLOG_REFRESH_KEY} or another version (its period may not be ${period} s)`);
    }
    const newestText = count === 0 ? 'no count in hunt_backlog yet' : `the newest count (${Number(newest?.value)}, at ${newest?.at ?? '?'}) is ${seconds(ageMs)} old`;
    if (!stale && problems.length === 0) return { name, status: 'ok', detail: `every ${period} s (${state}); ${newestText}` };
    const freshness = !stale
      ? `${newestText}: still fresh, the shim uses it until it is ${seconds(freshMs)} old`
      : count === 0
        ? `${newestText}, ${FALLBACK}`
        : `${newestText}, older than ${BACKLOG_FRESH_REFRESHES} refreshes (${seconds(freshMs)}), ${FALLBACK}`;
    const fix =
      refresh && refresh.exception !== ''
        ? `fix what the exception names (the view runs as the runner's user, which needs SELECT on the coordination tables and INSERT on ${ctx.database}.${TABLES.backlog}); the view retries at each refresh`
        : problems.length > 0
          ? setView
          : `check the view in system.view_refreshes (\`SYSTEM START VIEW ${view}\` if it was stopped) and the server's load`;
    return { name, status: 'warn', detail: `${setting} (${state}): ${[...problems, freshness].join('; ')}`, fix };
  });
}
