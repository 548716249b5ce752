import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../src/clickhouse/identifiers.js';
import { dueCountSql } from '../src/coordination/due-sql.js';
import { applySchema } from '../src/coordination/topology.js';
import { RUN_STATUS, TABLES } from '../src/coordination/tables.js';
import { dueCountFinalSql } from './due-final-sql.js';
import { goal, int, median, ms, type BenchLine } from './report.js';

/**
 * The due query at growing fleet sizes on the embedded engine: the product's
 * form (dueCountSql) against the obvious FINAL form (bench-only baseline).
 * Each table holds two versions of part of its rows in separate parts, so
 * both forms really have to collapse versions.
 */
export const DUE_SIZES = [1_000, 10_000, 100_000, 1_000_000] as const;
/** Timed runs per form: more where a run is short, so a burst of load moves the median less. */
const runsFor = (hunts: number): number => (hunts <= 10_000 ? 15 : hunts <= 100_000 ? 7 : 5);
/** Issue 13: the product's due query costs at most this much more than the FINAL form. */
const MAX_RATIO = 1.1;
/** The runner polls every 15 s by default; the due query is one part of a tick. */
const GOAL_MS = (hunts: number): number => (hunts <= 100_000 ? 1_000 : 5_000);

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

async function timeCount(client: ClickHouseClient, query: string): Promise<{ ms: number; count: number }> {
  const started = performance.now();
  const rs = await client.query({ query, format: 'JSONEachRow' });
  const rows = await rs.json<{ value: number | string }>();
  return { ms: performance.now() - started, count: Number(rows[0]?.value ?? Number.NaN) };
}

/**
 * Medians of `runs` timings of each query, interleaved (a, b, a, b, …) after one
 * warm-up each, so a burst of load on a shared machine hits both alike.
 */
async function measurePair(client: ClickHouseClient, a: string, b: string, runs: number): Promise<[{ ms: number; count: number }, { ms: number; count: number }]> {
  const firstA = await timeCount(client, a);
  const firstB = await timeCount(client, b);
  const timesA: number[] = [];
  const timesB: number[] = [];
  for (let i = 0; i < runs; i++) {
    timesA.push((await timeCount(client, a)).ms);
    timesB.push((await timeCount(client, b)).ms);
  }
  return [
    { ms: median(timesA), count: firstA.count },
    { ms: median(timesB), count: firstB.count },
  ];
}

export async function benchDueQuery(client: ClickHouseClient, sizes: readonly number[] = DUE_SIZES): Promise<BenchLine[]> {
  const lines: BenchLine[] = [];
  for (const hunts of sizes) {
    const database = `bench_due_${hunts}`;
    await seedDue(client, database, hunts);
    const runs = runsFor(hunts);
    const [due, final] = await measurePair(client, dueCountSql(database), dueCountFinalSql(database), runs);
    const agree = due.count === final.count;
    const ratio = due.ms / final.ms;
    lines.push({
      kind: 'figure',
      name: `due query, ${int(hunts)} hunts (median of ${runs})`,
      measured: `${ms(due.ms)} (${int(due.count)} due), ${ratio.toFixed(2)}× FINAL`,
      baseline: `FINAL form ${ms(final.ms)} (${int(final.count)} due${agree ? '' : ' — COUNTS DIFFER'})`,
      goal: `≤ ${MAX_RATIO}× the FINAL form, same count, < ${int(GOAL_MS(hunts))} ms`,
      outcome: goal(agree && ratio <= MAX_RATIO && due.ms < GOAL_MS(hunts)),
    });
    if (hunts === sizes[sizes.length - 1]) {
      // The run-now part with no requests at all: the same query after the
      // requested rows are gone, against the run with 0.1 % requested.
      await client.command({ query: `TRUNCATE TABLE ${qualifiedTable(database, TABLES.run)}` });
      const [none] = await measurePair(client, dueCountSql(database), dueCountFinalSql(database), runs);
      lines.push({
        kind: 'figure',
        name: `due query, ${int(hunts)} hunts, no run-now requests`,
        measured: `${ms(none.ms)} (${int(none.count)} due)`,
        baseline: `with 0.1 % requested ${ms(due.ms)}`,
        goal: 'informational',
        outcome: 'n/a',
      });
    }
    await client.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
  }
  return lines;
}
