import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { applySchema } from '../src/coordination/topology.js';
import { latestFire } from '../src/schedule/arithmetic.js';
import { startRunner } from '../src/runner/start.js';
import { qualifiedTable } from '../src/clickhouse/identifiers.js';
import { TABLES } from '../src/coordination/tables.js';
import { goal, int, ms, percentile, spread, type BenchLine } from './report.js';

/**
 * One runner, 10 000 hourly hunts, the embedded engine (docs/runner.md), through
 * the runner's exported startRunner with the loop driven here so each tick
 * can be timed: ClickHouse round trips of a tick (coordination only: hunt
 * statements run on their own sessions), tick time, and how late fires start.
 */
const HUNTS = 10_000;
const INTERVAL_SECONDS = 3_600;
const POLL_SECONDS = 5;
const CAP = 32;
const STEADY_SECONDS = 30;
const DATABASE = 'bench_runner';

/** Counts the coordination client's calls (an instrumented view of the real client, not a stand-in). */
function countingHandle(handle: ClickHouseHandle): { handle: ClickHouseHandle; calls: () => number } {
  let calls = 0;
  const counted = new Set(['query', 'command', 'insert', 'exec']);
  const client = new Proxy(handle.client, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (typeof prop === 'string' && counted.has(prop)) calls += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as ClickHouseClient;
  return { handle: { ...handle, client, close: async () => undefined }, calls: () => calls };
}

async function setWatermarks(client: ClickHouseClient, rows: { hunt_id: string; watermark: number }[]): Promise<void> {
  await client.insert({ table: qualifiedTable(DATABASE, TABLES.watermark), values: rows, format: 'JSONEachRow' });
}

export async function benchRunner(embedded: ClickHouseHandle, embeddedPath: string): Promise<BenchLine[]> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-bench-hunts-'));
  const ids = Array.from({ length: HUNTS }, (_, i) => `h-${String(i).padStart(5, '0')}`);
  // Offsets pinned evenly over the whole hour: hashed offsets fall in the first 80 % of it
  // (docs/schedule.md), so a 30 s window in its last 12 minutes would owe no fire at all.
  const offsetOf = new Map(ids.map((id, i) => [id, Math.floor((i * INTERVAL_SECONDS) / HUNTS)]));
  for (const id of ids) {
    writeFileSync(
      join(dir, `${id}.yaml`),
      `schedule: {mode: rate, interval: 1h, phase_offset: ${offsetOf.get(id)}}\nqueries:\n  - SELECT count() FROM system.one\n`,
    );
  }
  const config = loadConfig({
    DFE_CLICKHOUSE_BACKEND: 'embedded',
    DFE_EMBEDDED_PATH: embeddedPath,
    DFE_CLICKHOUSE_DATA_DATABASE: DATABASE,
    DFE_CLICKHOUSE_TOPOLOGY: 'single',
    DFE_HUNTS_DIR: dir,
    DFE_HUNT_RUNNER_POLL_SECONDS: String(POLL_SECONDS),
    DFE_HUNT_RUNNER_CAP: String(CAP),
    LOG_LEVEL: 'silent',
  });
  await embedded.client.command({ query: `DROP DATABASE IF EXISTS \`${DATABASE}\`` });
  await applySchema(embedded.client, DATABASE, { kind: 'single' });
  const { handle, calls } = countingHandle(embedded);
  const lateness: number[] = [];
  const runner = await startRunner({
    handle,
    config,
    loop: false,
    runnerId: 'bench-runner',
    events: { claim: (e) => e.outcome === 'won' && lateness.push(e.plannedAt - e.fire) },
  });
  try {
    const nowSeconds = Math.floor(Date.now() / 1000);
    // Idle: every watermark a day ahead, so nothing is due; the tick is pure coordination.
    await setWatermarks(embedded.client, ids.map((hunt_id) => ({ hunt_id, watermark: nowSeconds + 86_400 })));
    const idleCalls: number[] = [];
    const idleMs: number[] = [];
    for (let i = 0; i < 6; i++) {
      const before = calls();
      const started = performance.now();
      await runner.tick();
      idleMs.push(performance.now() - started);
      idleCalls.push(calls() - before);
    }
    // Steady state: each hunt's watermark at its latest fire; fires come due as the clock moves.
    const steadyNow = Math.floor(Date.now() / 1000);
    await setWatermarks(
      embedded.client,
      ids.map((hunt_id) => ({ hunt_id, watermark: latestFire(steadyNow, INTERVAL_SECONDS, offsetOf.get(hunt_id) ?? 0) })),
    );
    const tickMs: number[] = [];
    let started = 0;
    let lastServerNow = steadyNow;
    const endAt = Date.now() + STEADY_SECONDS * 1000;
    while (Date.now() < endAt) {
      const t0 = performance.now();
      const record = await runner.tick();
      const took = performance.now() - t0;
      tickMs.push(took);
      started += record?.started ?? 0;
      lastServerNow = record?.serverNow ?? lastServerNow;
      await new Promise((r) => setTimeout(r, Math.max(0, POLL_SECONDS * 1000 - took)));
    }
    await runner.idle();
    // Fires that came due between the steady-state start and the last tick's server clock.
    const owed = ids.filter((id) => {
      const offset = offsetOf.get(id) ?? 0;
      return latestFire(lastServerNow, INTERVAL_SECONDS, offset) > latestFire(steadyNow, INTERVAL_SECONDS, offset);
    }).length;
    const roundTrips = percentile(idleCalls.slice(1), 50);
    const p99Late = percentile(lateness, 99);
    return [
      {
        kind: 'figure',
        name: `runner, ${int(HUNTS)} hunts: ClickHouse round trips per tick (nothing due)`,
        measured: `${roundTrips} round trips (${idleCalls.slice(1).join(', ')}); idle tick p50 ${ms(percentile(idleMs.slice(1), 50))}`,
        baseline: `the first tick after start: ${idleCalls[0]} round trips, ${ms(idleMs[0] ?? 0)}`,
        goal: '≤ 3 round trips per tick (heartbeat + one due query), whatever the hunt count',
        outcome: goal(roundTrips <= 3),
        shortName: `runner, ${int(HUNTS)} hunts, idle tick`,
        headline: `${roundTrips} ClickHouse round trips per tick (median of ${idleCalls.length - 1}); tick ${ms(percentile(idleMs.slice(1), 50))}`,
        spreads: [spread(idleCalls.slice(1), 'round trips', ''), spread(idleMs.slice(1), 'idle tick', 'ms')],
      },
      {
        kind: 'figure',
        name: `runner, ${int(HUNTS)} hourly hunts (offsets pinned evenly over the hour), ${STEADY_SECONDS} s steady state (poll ${POLL_SECONDS} s, cap ${CAP})`,
        measured:
          `tick p50 ${ms(percentile(tickMs, 50))}, p99 ${ms(percentile(tickMs, 99))}; ${started} runs started, ` +
          `fire lateness p50 ${percentile(lateness, 50)} s, p99 ${p99Late} s (${lateness.length} won claims of ${owed} fires owed)`,
        baseline: `poll interval ${POLL_SECONDS} s (a fire waits for the next tick: ≈ poll/2 on average)`,
        goal: `lateness p99 ≤ poll + 2 s, every fire that came due started`,
        outcome: goal(owed > 0 && lateness.length === owed && p99Late <= POLL_SECONDS + 2),
        shortName: `runner, ${int(HUNTS)} hunts, steady state`,
        headline:
          `fire lateness p50 ${percentile(lateness, 50)} s, p99 ${p99Late} s (poll ${POLL_SECONDS} s); ` +
          `${lateness.length} of ${owed} fires owed started; tick p50 ${ms(percentile(tickMs, 50))}`,
        spreads: tickMs.length > 0 ? [spread(tickMs, 'tick', 'ms')] : [],
      },
    ];
  } finally {
    await runner.stop();
    await embedded.client.command({ query: `DROP DATABASE IF EXISTS \`${DATABASE}\`` });
    rmSync(dir, { recursive: true, force: true });
  }
}
