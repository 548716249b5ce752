import { loadavg } from 'node:os';
import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../src/clickhouse/identifiers.js';
import { backlogCountSql, BACKLOG_FRESH_REFRESHES } from '../src/coordination/backlog-refresh.js';
import { dueCountSql } from '../src/coordination/due-sql.js';
import { applySchema } from '../src/coordination/topology.js';
import { DEFAULT_SCHEMA_OPTIONS, RUN_STATUS, TABLES } from '../src/coordination/tables.js';
import { dueCountFinalSql } from './due-final-sql.js';
import { goal, int, median, ms, spread, type BenchLine, type Spread } from './report.js';

/**
 * The due query at growing fleet sizes on the embedded engine: the product's
 * form (dueCountSql) against the obvious FINAL form (bench-only baseline).
 * Each table holds two versions of part of its rows in separate parts, so
 * both forms really have to collapse versions. Both are timed at the server's
 * clock, as the product runs; their counts are compared at one pinned clock
 * reading (`{now:Int64}`), since at 1 M hunts a second can pass between them.
 */
export const DUE_SIZES = [1_000, 10_000, 100_000, 1_000_000] as const;
/** Timed pairs per size: more where a run is short, so a burst of load moves the median less. */
const runsFor = (hunts: number): number => (hunts <= 10_000 ? 41 : hunts <= 100_000 ? 15 : 7);
/**
 * The count KEDA asks costs no more than the FINAL form up to 100 000 hunts (issue 29; issue 13
 * allowed 1.1×, which stays the bound at 1 M, where the goal is the time itself).
 */
const MAX_RATIO = (hunts: number): number => (hunts <= 100_000 ? 1.0 : 1.1);
/** Up to 100 000 hunts the runner's tick bounds it; at 1 M the count must stay O(due)-cheap (issue 29). */
const GOAL_MS = (hunts: number): number => (hunts <= 100_000 ? 1_000 : 50);

export async function seedDue(client: ClickHouseClient, database: string, hunts: number): Promise<void> {
  await client.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
  await applySchema(client, database, { kind: 'single' });
  const t = (name: string) => qualifiedTable(database, name);
  // Versions a day apart, recent: hunt_run's retention TTL drops older rows on insert.
  const v1 = 'subtractDays(now64(3), 2)';
  const v2 = 'subtractDays(now64(3), 1)';
  const now = 'toInt64(toUnixTimestamp(now()))';
  const params = { n: hunts };
  const run = (query: string) => client.command({ query, query_params: params });
  // v1: every hunt; v2 (a later part): 10% change interval, 1% become tombstones.
  await run(`INSERT INTO ${t(TABLES.schedule)} (hunt_id, interval_seconds, phase_offset, enabled, updated)
    SELECT concat('h-', toString(number)), [60, 300, 900, 3600][number % 4 + 1], number % 48, 1, ${v1} FROM numbers({n:UInt64})`);
  await run(`INSERT INTO ${t(TABLES.schedule)} (hunt_id, interval_seconds, phase_offset, enabled, updated)
    SELECT concat('h-', toString(number)), if(number % 100 = 0, 0, 300), if(number % 100 = 0, 0, number % 240),
      if(number % 100 = 0, 0, 1), ${v2} FROM numbers({n:UInt64}) WHERE number % 10 = 0`);
  // Watermarks for half the fleet, a newer one for a tenth of those.
  await run(`INSERT INTO ${t(TABLES.watermark)} (hunt_id, watermark, updated)
    SELECT concat('h-', toString(number)), ${now} - 7200 - number % 3600, ${v1} FROM numbers({n:UInt64}) WHERE number % 2 = 0`);
  await run(`INSERT INTO ${t(TABLES.watermark)} (hunt_id, watermark, updated)
    SELECT concat('h-', toString(number)), ${now} - number % 120, ${v2} FROM numbers({n:UInt64}) WHERE number % 20 = 0`);
  // Leases: 10% of hunts, half of them live, then released for some.
  await run(`INSERT INTO ${t(TABLES.lease)} (hunt_id, owner, fire, lease_until, claimed)
    SELECT concat('h-', toString(number)), 'runner-a', ${now} - 60, if(number % 20 = 0, ${now} + 300, ${now} - 10), ${v1}
    FROM numbers({n:UInt64}) WHERE number % 10 = 0`);
  await run(`INSERT INTO ${t(TABLES.lease)} (hunt_id, owner, fire, lease_until, claimed)
    SELECT concat('h-', toString(number)), 'runner-a', ${now} - 60, 0, ${v2} FROM numbers({n:UInt64}) WHERE number % 40 = 0`);
  // hunt_state for 1%: overrun rows, and for a quarter of those a newer auto-disable.
  await run(`INSERT INTO ${t(TABLES.state)} (hunt_id, overrun_count, too_aggressive, updated)
    SELECT concat('h-', toString(number)), 1, 0, ${v1} FROM numbers({n:UInt64}) WHERE number % 100 = 7`);
  await run(`INSERT INTO ${t(TABLES.state)} (hunt_id, overrun_count, too_aggressive, disabled_reason, disabled_at, updated)
    SELECT concat('h-', toString(number)), 1, 0, 'memory_limit', ${v2}, ${v2} FROM numbers({n:UInt64}) WHERE number % 400 = 7`);
  // Run-now requests for 0.1%.
  await run(`INSERT INTO ${t(TABLES.run)} (hunt_id, fire, status, rows_written, updated)
    SELECT concat('h-', toString(number)), ${now} - 5, '${RUN_STATUS.requested}', 0, ${v1} FROM numbers({n:UInt64}) WHERE number % 1000 = 0`);
}

/** One timing of a query: wall time, and the CPU time of this process (the engine runs in it). */
interface Sample {
  readonly wallMs: number;
  readonly cpuMs: number;
}

async function timeOnce(client: ClickHouseClient, query: string): Promise<Sample> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const rs = await client.query({ query, format: 'JSONEachRow' });
  await rs.json();
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

/** The count of a `{now:Int64}` form at one pinned clock reading. */
async function countAt(client: ClickHouseClient, query: string, now: number): Promise<number> {
  const rs = await client.query({ query, format: 'JSONEachRow', query_params: { now } });
  const rows = await rs.json<{ value: number | string }>();
  return Number(rows[0]?.value ?? Number.NaN);
}

/** A query measured against a baseline: medians, and the median of the per-pair ratios. */
interface Paired {
  readonly wallMs: number;
  readonly cpuMs: number;
  readonly baseWallMs: number;
  readonly baseCpuMs: number;
  readonly wallRatio: number;
  readonly cpuRatio: number;
  /** The per-pair ratios (wall, CPU) whose medians are the two ratios above. */
  readonly spreads: readonly Spread[];
}

/**
 * `runs` timings of `query` and of `base`, interleaved with the order flipped
 * every pair (a b, b a, a b, …) after two warm-ups each, so a burst of load on a
 * shared machine and any first-or-second effect hit both alike. The ratio is the
 * median of the per-pair ratios (each pair ran back to back under the same
 * load), not a ratio of two medians. CPU time is the whole process's, which is
 * the engine's work here; wall time is what a caller waits.
 */
async function measurePair(client: ClickHouseClient, query: string, base: string, runs: number): Promise<Paired> {
  for (let i = 0; i < 2; i++) {
    await timeOnce(client, query);
    await timeOnce(client, base);
  }
  const a: Sample[] = [];
  const b: Sample[] = [];
  for (let i = 0; i < runs; i++) {
    if (i % 2 === 0) {
      a.push(await timeOnce(client, query));
      b.push(await timeOnce(client, base));
    } else {
      b.push(await timeOnce(client, base));
      a.push(await timeOnce(client, query));
    }
  }
  const ratios = (pick: (x: Sample) => number) => a.map((x, i) => pick(x) / pick(b[i] ?? x));
  const ratio = (pick: (x: Sample) => number) => median(ratios(pick));
  return {
    wallMs: median(a.map((x) => x.wallMs)),
    cpuMs: median(a.map((x) => x.cpuMs)),
    baseWallMs: median(b.map((x) => x.wallMs)),
    baseCpuMs: median(b.map((x) => x.cpuMs)),
    wallRatio: ratio((x) => x.wallMs),
    cpuRatio: ratio((x) => x.cpuMs),
    spreads: [spread(ratios((x) => x.wallMs), 'wall ratio', '×'), spread(ratios((x) => x.cpuMs), 'CPU ratio', '×')],
  };
}

/**
 * The product's count with its run-now part cut out (the hunt_run LEFT JOIN, and
 * "no request" in its place): what the run-now part is measured against when
 * there are no requests. Bench only; throws if due-sql.ts no longer has the
 * shape this cuts, rather than measure something else.
 */
function withoutRunNow(sql: string): string {
  const joinEnd = sql.indexOf(') AS r ON r.hunt_id = s.hunt_id');
  const joinStart = sql.lastIndexOf('\n  LEFT JOIN (', joinEnd);
  if (joinEnd < 0 || joinStart < 0 || !sql.slice(joinStart, joinEnd).includes(TABLES.run)) {
    throw new Error('bench/due-query.ts: the run-now LEFT JOIN of dueCountSql is not where withoutRunNow expects it');
  }
  const cut = sql.slice(0, joinStart) + sql.slice(joinEnd + ') AS r ON r.hunt_id = s.hunt_id'.length);
  const out = cut.replace('r.req_fire AS req_fire', 'toInt64(0) AS req_fire').replace('r.has_req = 1', '0');
  if (/\br\./.test(out) || out.includes(TABLES.run)) throw new Error('bench/due-query.ts: withoutRunNow left a reference to the run-now join');
  return out;
}

/** hunt_run with history and no request: one succeeded run per hunt, an hour or more ago. */
async function seedRunHistoryOnly(client: ClickHouseClient, database: string, hunts: number): Promise<void> {
  const run = qualifiedTable(database, TABLES.run);
  await client.command({ query: `TRUNCATE TABLE ${run}` });
  await client.command({
    query: `INSERT INTO ${run} (hunt_id, fire, status, rows_written, updated)
      SELECT concat('h-', toString(number)), toInt64(toUnixTimestamp(now())) - 3600 - number % 3600, '${RUN_STATUS.succeeded}', 1,
        subtractDays(now64(3), 1) FROM numbers({n:UInt64})`,
    query_params: { n: hunts },
  });
}

/** The period the refreshed-count figure runs with (DFE_BACKLOG_REFRESH_SECONDS): the chart's suggestion for a large fleet. */
const REFRESH_SECONDS = 10;

/** The newest appended count and its clock reading, once the view has appended one (bounded wait). */
async function newestRefresh(client: ClickHouseClient, database: string): Promise<{ at: number; value: number }> {
  for (let i = 0; i < 600; i++) {
    const rs = await client.query({
      query: `SELECT toUnixTimestamp(computed_at) AS at, value FROM ${qualifiedTable(database, TABLES.backlog)} ORDER BY computed_at DESC LIMIT 1`,
      format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ at: number | string; value: number | string }>();
    if (row) return { at: Number(row.at), value: Number(row.value) };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('bench/due-query.ts: the refreshable view appended no count in 60 s');
}

/** Rows the shim's read touches while the count is fresh (the JSON format's statistics). */
async function rowsRead(client: ClickHouseClient, query: string): Promise<number> {
  const rs = await client.query({ query, format: 'JSON' });
  const body = await rs.json<{ statistics?: { rows_read?: number } }>();
  return Number(body.statistics?.rows_read ?? Number.NaN);
}

/**
 * The count KEDA asks with the server-refreshed count on (docs/tables.md#the-server-refreshed-count):
 * the schema step creates the view, the server appends THE due count, and the shim's read
 * (backlogCountSql) is timed against the FINAL form while the view keeps refreshing every
 * REFRESH_SECONDS, as it would in production. The appended count must equal the due count
 * at the clock reading it was taken at.
 */
async function benchRefreshedCount(client: ClickHouseClient, database: string, hunts: number, runs: number): Promise<BenchLine> {
  await applySchema(client, database, { kind: 'single' }, { ...DEFAULT_SCHEMA_OPTIONS, backlogRefreshSeconds: REFRESH_SECONDS });
  const refreshed = await newestRefresh(client, database);
  const exact = await countAt(client, dueCountSql(database, { now: 'param' }), refreshed.at);
  const agree = refreshed.value === exact;
  const read = backlogCountSql(database, REFRESH_SECONDS);
  const p = await measurePair(client, read, dueCountFinalSql(database), runs);
  const touched = await rowsRead(client, read);
  const rs = await client.query({
    query: `SELECT last_success_duration_ms AS ms FROM system.view_refreshes WHERE database = {db:String} AND view = {view:String}`,
    query_params: { db: database, view: TABLES.backlogRefresh },
    format: 'JSONEachRow',
  });
  const [refresh] = await rs.json<{ ms: number | string | null }>();
  await applySchema(client, database, { kind: 'single' }, DEFAULT_SCHEMA_OPTIONS);
  const name = `due query, ${int(hunts)} hunts, server-refreshed count (DFE_BACKLOG_REFRESH_SECONDS=${REFRESH_SECONDS}; ${runs} interleaved pairs)`;
  return {
    kind: 'figure',
    name,
    shortName: `due query, ${int(hunts)} hunts, server-refreshed count`,
    headline: `${ms(p.wallMs)}: ${ratioText(p)} the FINAL form (median of ${runs} pairs)${agree ? '' : ', COUNTS DIFFER'}`,
    measured:
      `the shim's read ${ms(p.wallMs)}, ${ratioText(p)} the FINAL form, ${int(touched)} rows read; ` +
      `the view's appended count ${int(refreshed.value)} (the due count at its clock reading: ${int(exact)}), ` +
      `its last refresh ${refresh?.ms == null ? 'n/a' : ms(Number(refresh.ms))} every ${REFRESH_SECONDS} s; ${load()}`,
    baseline: `FINAL form ${ms(p.baseWallMs)}`,
    goal:
      `< ${int(GOAL_MS(hunts))} ms and ≤ ${MAX_RATIO(hunts).toFixed(1)}× the FINAL form in wall and CPU time; the appended count equals the due count ` +
      `at its clock reading; a count older than ${BACKLOG_FRESH_REFRESHES} refreshes is never answered (test/coordination/backlog-refresh.test.ts)`,
    outcome: goal(agree && p.wallRatio <= MAX_RATIO(hunts) && p.cpuRatio <= MAX_RATIO(hunts) && p.wallMs < GOAL_MS(hunts)),
    spreads: p.spreads,
  };
}

const ratioText = (p: Paired): string => `${p.wallRatio.toFixed(2)}× (CPU ${p.cpuRatio.toFixed(2)}×)`;
const load = (): string => `load ${(loadavg()[0] ?? 0).toFixed(1)}`;

export async function benchDueQuery(client: ClickHouseClient, sizes: readonly number[] = DUE_SIZES): Promise<BenchLine[]> {
  const lines: BenchLine[] = [];
  for (const hunts of sizes) {
    const database = `bench_due_${hunts}`;
    await seedDue(client, database, hunts);
    const runs = runsFor(hunts);
    const now = Math.floor(Date.now() / 1000);
    const dueCount = await countAt(client, dueCountSql(database, { now: 'param' }), now);
    const finalCount = await countAt(client, dueCountFinalSql(database, { now: 'param' }), now);
    const agree = dueCount === finalCount;
    const p = await measurePair(client, dueCountSql(database), dueCountFinalSql(database), runs);
    lines.push({
      kind: 'figure',
      name: `due query, ${int(hunts)} hunts (${runs} interleaved pairs)`,
      shortName: `due query, ${int(hunts)} hunts`,
      headline: `${ms(p.wallMs)}: ${ratioText(p)} the FINAL form (median of ${runs} pairs)${agree ? '' : ', COUNTS DIFFER'}`,
      measured: `${ms(p.wallMs)} (${int(dueCount)} due), ${ratioText(p)} the FINAL form; ${load()}`,
      baseline: `FINAL form ${ms(p.baseWallMs)} (${int(finalCount)} due${agree ? '' : ' — COUNTS DIFFER'})`,
      goal: `≤ ${MAX_RATIO(hunts).toFixed(1)}× the FINAL form in wall and CPU time, same count at one clock reading, < ${int(GOAL_MS(hunts))} ms`,
      outcome: goal(agree && p.wallRatio <= MAX_RATIO(hunts) && p.cpuRatio <= MAX_RATIO(hunts) && p.wallMs < GOAL_MS(hunts)),
      spreads: p.spreads,
    });
    if (hunts === sizes[sizes.length - 1]) {
      lines.push(await benchRefreshedCount(client, database, hunts, runs));
      // No run-now requests, as most of the time: hunt_run holds only finished
      // runs. The product against itself without the run-now part.
      await seedRunHistoryOnly(client, database, hunts);
      const none = await measurePair(client, dueCountSql(database), withoutRunNow(dueCountSql(database)), runs);
      lines.push({
        kind: 'figure',
        name: `due query, ${int(hunts)} hunts, no run-now requests (hunt_run: ${int(hunts)} finished runs; ${runs} interleaved pairs)`,
        shortName: `due query, ${int(hunts)} hunts, no run-now requests`,
        headline: `${ratioText(none)} the same query without its run-now part (median of ${runs} pairs)`,
        measured: `${ms(none.wallMs)}, ${ratioText(none)} the same query without its run-now part; ${load()}`,
        baseline: `without the run-now part ${ms(none.baseWallMs)}`,
        goal: 'informational: what the run-now part costs when nothing is requested',
        outcome: 'n/a',
        spreads: none.spreads,
      });
    }
    await client.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
  }
  return lines;
}
