import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../src/clickhouse/identifiers.js';
import { dueCountSql } from '../src/coordination/due-sql.js';
import { applySchema } from '../src/coordination/topology.js';
import { RUN_STATUS, TABLES } from '../src/coordination/tables.js';
import { dueCountFinalSql } from './due-final-sql.js';
import { goal, int, median, ms, type BenchLine } from './report.js';

/**
 * The due query at growing fleet sizes on the embedded engine: the product's
 * argMax form (dueCountSql) against the FINAL form (bench-only baseline).
 * Each table holds two versions of part of its rows in separate parts, so
 * both forms really have to collapse versions.
 */
export const DUE_SIZES = [1_000, 10_000, 100_000, 1_000_000] as const;
const RUNS = 3;
/** The runner polls every 15 s by default; the due query is one part of a tick. */
const GOAL_MS = (hunts: number): number => (hunts <= 100_000 ? 1_000 : 5_000);

async function seed(client: ClickHouseClient, database: string, hunts: number): Promise<void> {
  await client.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
  await applySchema(client, database, { kind: 'single' });
  const t = (name: string) => qualifiedTable(database, name);
  const v1 = "toDateTime64('2026-01-01 00:00:00', 3)";
  const v2 = "toDateTime64('2026-01-02 00:00:00', 3)";
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

async function measure(client: ClickHouseClient, query: string): Promise<{ ms: number; count: number }> {
  const first = await timeCount(client, query); // warm-up, not counted
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) times.push((await timeCount(client, query)).ms);
  return { ms: median(times), count: first.count };
}

export async function benchDueQuery(client: ClickHouseClient, sizes: readonly number[] = DUE_SIZES): Promise<BenchLine[]> {
  const lines: BenchLine[] = [];
  for (const hunts of sizes) {
    const database = `bench_due_${hunts}`;
    await seed(client, database, hunts);
    const argMax = await measure(client, dueCountSql(database));
    const final = await measure(client, dueCountFinalSql(database));
    await client.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
    const agree = argMax.count === final.count;
    lines.push({
      kind: 'figure',
      name: `due query, ${int(hunts)} hunts (argMax, median of ${RUNS})`,
      measured: `${ms(argMax.ms)} (${int(argMax.count)} due)`,
      baseline: `FINAL form ${ms(final.ms)} (${int(final.count)} due${agree ? '' : ' — COUNTS DIFFER'})`,
      goal: `< ${int(GOAL_MS(hunts))} ms and same count as FINAL`,
      outcome: goal(agree && argMax.ms < GOAL_MS(hunts)),
    });
  }
  return lines;
}
