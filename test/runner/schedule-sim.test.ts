import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { applySchema } from '../../src/coordination/topology.js';
import { latestFire, phaseOffset } from '../../src/schedule/arithmetic.js';
import type { RunnerEvents } from '../../src/runner/fire.js';
import { startRunner, type RunnerHandle } from '../../src/runner/start.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { createOutputTable, outputHunt, outputRows, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * The real runner and the real SQL, with simulated time: the `clock` time source
 * binds the injected ManualClock as `{now:Int64}` wherever the runner would use
 * ClickHouse's clock, so an hour of polls takes a second.
 */
let db: TestDatabase;
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  db = await openTestDatabase('sim');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOutputTable(db);
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => db?.close());

interface RunSeen {
  fire: number;
  polledAt: number;
  window: { startSeconds: number; endSeconds: number };
}

async function simulatedRunner(
  huntId: string,
  interval: number | string,
  options: { sleepSeconds?: number; onStatement?: () => void } = {},
): Promise<{ runner: RunnerHandle; clock: ManualClock; runs: RunSeen[] }> {
  const hunts = tempHuntsDir();
  hunts.write(huntId, outputHunt(db.database, huntId, interval, options));
  const clock = new ManualClock(0);
  const runs: RunSeen[] = [];
  const events: RunnerEvents = {
    run: (e) => {
      expect(e.outcome).toBe('succeeded');
      runs.push({ fire: e.fire, polledAt: clock.nowMs() / 1000, window: e.window });
    },
    statement: () => options.onStatement?.(),
  };
  const config = runnerConfig(db, hunts.dir, { DFE_HUNT_RUNNER_SETTLE_MS: '250', DFE_HUNT_RUNNER_POLL_SECONDS: '15' });
  const runner = await startRunner({ handle: db.handle, config, clock, time: 'clock', loop: false, events });
  cleanups.push(hunts.remove, () => runner.stop());
  return { runner, clock, runs };
}

async function pollAt(sim: { runner: RunnerHandle; clock: ManualClock }, seconds: number): Promise<void> {
  sim.clock.set(seconds * 1000);
  const record = await sim.runner.tick();
  expect(record, 'the tick reached ClickHouse').toBeDefined();
  expect(record?.gate).toBe(record?.backlog);
  await sim.runner.idle();
}

describe('schedule on the real engine, simulated time', () => {
  it('fires a hunt whose offset falls between two poll ticks exactly once per interval', async () => {
    const id = 'post-1682300-71da5fa4';
    expect(phaseOffset(id, 60)).toBe(46);
    const sim = await simulatedRunner(id, 60);
    const minute = 1_900_000_020; // a whole minute
    for (let t = minute; t < minute + 10 * 60; t += 15) await pollAt(sim, t);
    // :46 is never a poll instant; each fire runs at the next :00 poll, 14 s late, once.
    const expected = Array.from({ length: 10 }, (_, i) => minute - 14 + i * 60);
    expect(sim.runs.map((r) => r.fire)).toEqual(expected);
    expect(sim.runs.map((r) => r.polledAt - r.fire)).toEqual(expected.map(() => 14));
    const rows = (await outputRows(db)).filter((r) => r.hunt_id === id);
    expect(rows.map((r) => r.fire)).toEqual(expected);
    for (const [i, r] of rows.entries()) expect(r.window_start).toBe(i === 0 ? r.fire - 60 : rows[i - 1]?.fire);
  });

  it('after an outage runs only the latest fire, over the whole missed window', async () => {
    const id = 'catch-up';
    const interval = 10;
    const offset = phaseOffset(id, interval);
    const sim = await simulatedRunner(id, interval);
    const start = 1_900_001_000;
    for (let t = start; t <= start + 30; t += 2) await pollAt(sim, t);
    const before = sim.runs.length;
    const lastBefore = sim.runs.at(-1);
    expect(before).toBeGreaterThanOrEqual(3);

    // Nine intervals and a half pass without a tick.
    const back = start + 30 + 95;
    await pollAt(sim, back);
    const latest = latestFire(back, interval, offset);
    expect(sim.runs.slice(before).map((r) => r.fire)).toEqual([latest]);
    expect(sim.runs.at(-1)?.window).toEqual({ startSeconds: lastBefore?.fire, endSeconds: latest });
    // Caught up: the next polls inside the same interval run nothing.
    await pollAt(sim, back + 1);
    expect(sim.runs).toHaveLength(before + 1);
  });

  it('materialises on start, tombstoning hunts that left the directory', async () => {
    const leaving = await simulatedRunner('leaving', 30);
    await leaving.runner.stop();
    const staying = await simulatedRunner('staying', 30);
    staying.clock.set(1_900_002_000_000);
    await staying.runner.tick();
    const rs = await db.handle.client.query({
      query: `SELECT hunt_id, argMax(enabled, updated) AS enabled, argMax(interval_seconds, updated) AS i
              FROM \`${db.database}\`.hunt_schedule WHERE hunt_id IN ('leaving', 'staying') GROUP BY hunt_id ORDER BY hunt_id`,
      format: 'JSONEachRow',
    });
    const rows = await rs.json<{ hunt_id: string; enabled: number; i: number }>();
    expect(rows.map((r) => [r.hunt_id, Number(r.enabled), Number(r.i)])).toEqual([
      ['leaving', 0, 0],
      ['staying', 1, 30],
    ]);
  });

  it('counts an overrun when the next fire comes due while the lease holder still runs the last one', async () => {
    const id = 'slow';
    let running: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (running = resolve));
    const sim = await simulatedRunner(id, 10, { sleepSeconds: 1.5, onStatement: () => running() });
    const offset = phaseOffset(id, 10);
    const start = 1_900_003_000 - (1_900_003_000 % 10) + offset; // a fire instant
    sim.clock.set(start * 1000);
    expect((await sim.runner.tick())?.started).toBe(1);
    // Once the run sleeps, simulated time jumps past the next fire.
    await started;
    sim.clock.set((start + 10) * 1000);
    const during = await sim.runner.tick();
    expect(during?.started).toBe(0);
    await sim.runner.idle();
    const overruns = (await sim.runner.metrics.overruns.get()).values[0]?.value;
    expect(overruns).toBe(1);
    const rs = await db.handle.client.query({
      query: `SELECT argMax(overrun_count, updated) AS n FROM \`${db.database}\`.hunt_state WHERE hunt_id = {id:String}`,
      query_params: { id },
      format: 'JSONEachRow',
    });
    expect((await rs.json<{ n: number }>()).map((r) => Number(r.n))).toEqual([1]);
    // The owed newer fire runs at the next tick, over the window since the slow one.
    await pollAt(sim, start + 11);
    expect(sim.runs.map((r) => [r.fire, r.window.startSeconds])).toEqual([
      [start, start - 10],
      [start + 10, start],
    ]);
  });
});
