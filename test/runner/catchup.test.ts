import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { applySchema } from '../../src/coordination/topology.js';
import { latestFire, phaseOffset } from '../../src/schedule/arithmetic.js';
import type { RunWindow } from '../../src/schedule/window.js';
import { startRunner, type RunnerHandle } from '../../src/runner/start.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { createOutputTable, outputHunt, outputRows, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';
import { capturingLogger } from '../helpers/logger.js';

/**
 * docs/hunts.md#catch-up on the real engine, simulated time (the `clock` time source binds
 * the injected ManualClock wherever the runner would use ClickHouse's clock): after an
 * outage longer than max_catchup the run covers only the newest max_catchup, and the
 * skipped range is in the log, in a counter and in hunt_run, while the watermark moves on.
 */
let db: TestDatabase;
const cleanups: Array<() => Promise<void> | void> = [];
const HOUR = 3600;

beforeAll(async () => {
  db = await openTestDatabase('catchup');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOutputTable(db);
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => db?.close());

interface Sim {
  runner: RunnerHandle;
  clock: ManualClock;
  runs: Array<{ fire: number; window: RunWindow; skipped: RunWindow | undefined }>;
  lines: Array<Record<string, unknown>>;
}

async function simulate(huntId: string, yaml: string, env: Record<string, string> = {}): Promise<Sim> {
  const hunts = tempHuntsDir();
  hunts.write(huntId, yaml);
  const clock = new ManualClock(0);
  const { logger: log, lines } = capturingLogger('info');
  const runs: Sim['runs'] = [];
  const config = runnerConfig(db, hunts.dir, { DFE_HUNT_RUNNER_SETTLE_MS: '250', ...env });
  const runner = await startRunner({
    handle: db.handle,
    config,
    clock,
    time: 'clock',
    loop: false,
    log,
    events: {
      run: (e) => {
        expect(e.outcome).toBe('succeeded');
        runs.push({ fire: e.fire, window: e.window, skipped: e.skipped });
      },
    },
  });
  cleanups.push(hunts.remove, () => runner.stop());
  return { runner, clock, runs, lines };
}

async function pollAt(sim: Sim, seconds: number): Promise<void> {
  sim.clock.set(seconds * 1000);
  expect(await sim.runner.tick(), 'the tick reached ClickHouse').toBeDefined();
  await sim.runner.idle();
}

async function skipRows(huntId: string) {
  const rows = await queryRows<Record<string, string | number>>(
    db,
    `SELECT fire, status, skipped_from, skipped_to FROM \`${db.database}\`.hunt_run FINAL
     WHERE hunt_id = {h:String} ORDER BY fire`,
    { h: huntId },
  );
  return rows.map((r) => ({ fire: Number(r.fire), status: String(r.status), skipped_from: Number(r.skipped_from), skipped_to: Number(r.skipped_to) }));
}

async function watermark(huntId: string): Promise<number> {
  const [row] = await queryRows<{ wm: string | number }>(
    db,
    `SELECT argMax(watermark, updated) AS wm FROM \`${db.database}\`.hunt_watermark WHERE hunt_id = {h:String}`,
    { h: huntId },
  );
  return Number(row?.wm);
}

async function counter(sim: Sim, huntId: string): Promise<number> {
  const metric = await sim.runner.metrics.catchupSkipped.get();
  return metric.values.find((v) => v.labels.hunt_id === huntId)?.value ?? 0;
}

describe('bounded catch-up on the real engine', () => {
  it("a hunt's max_catchup cuts the window after a long outage; the skip is logged, counted and queryable", async () => {
    const id = 'long-outage';
    const interval = 60;
    const sim = await simulate(id, `${outputHunt(db.database, id, interval)}max_catchup: 10m\n`);
    const offset = phaseOffset(id, interval);
    const start = 1_900_000_000;
    await pollAt(sim, start);
    const first = latestFire(start, interval, offset);
    expect(sim.runs.map((r) => r.fire)).toEqual([first]);
    expect(sim.runs[0]?.skipped).toBeUndefined();

    // Three hours without a tick, then one poll.
    const back = start + 3 * HOUR + 7;
    await pollAt(sim, back);
    const fire = latestFire(back, interval, offset);
    const run = sim.runs.at(-1);
    expect(run?.fire).toBe(fire);
    expect(run?.window).toEqual({ startSeconds: fire - 600, endSeconds: fire });
    expect(run?.skipped).toEqual({ startSeconds: first, endSeconds: fire - 600 });

    // What the hunt's statements saw: the bounded window, bound as parameters.
    const out = (await outputRows(db)).filter((r) => r.hunt_id === id);
    expect(out.map((r) => [r.window_start, r.window_end])).toEqual([
      [first - interval, first],
      [fire - 600, fire],
    ]);
    // The operator's row, the counter and the log line.
    expect(await skipRows(id)).toEqual([
      { fire: first, status: 'succeeded', skipped_from: 0, skipped_to: 0 },
      { fire, status: 'succeeded', skipped_from: first, skipped_to: fire - 600 },
    ]);
    expect(await counter(sim, id)).toBe(1);
    const warned = sim.lines.filter((l) => String(l.msg).startsWith('catch-up bounded'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, hunt: id, fire, skipped_from: first, skipped_to: fire - 600, max_catchup_seconds: 600 });
    expect(String(warned[0]?.msg)).toContain(`hunt ${id} skips [${new Date(first * 1000).toISOString()}, ${new Date((fire - 600) * 1000).toISOString()})`);

    // The watermark moved past the skipped range: the next fire runs one ordinary interval.
    expect(await watermark(id)).toBe(fire);
    await pollAt(sim, fire + interval + 1);
    expect(sim.runs.at(-1)).toEqual({ fire: fire + interval, window: { startSeconds: fire, endSeconds: fire + interval }, skipped: undefined });
    expect(await counter(sim, id)).toBe(1);
  });

  it('the global DFE_HUNT_MAX_CATCHUP_SECONDS applies to a hunt without its own, and a shorter outage skips nothing', async () => {
    const id = 'global-bound';
    const interval = 60;
    const sim = await simulate(id, outputHunt(db.database, id, interval), { DFE_HUNT_MAX_CATCHUP_SECONDS: '30m' });
    // The hunt's series is exported at 0 from the start, so an alert sees the first skip as an increase.
    const exported = (await sim.runner.metrics.catchupSkipped.get()).values.find((v) => v.labels.hunt_id === id);
    expect(exported?.value).toBe(0);
    const offset = phaseOffset(id, interval);
    const start = 1_900_100_000;
    await pollAt(sim, start);
    const first = latestFire(start, interval, offset);

    // 20 minutes down: within the bound, the whole gap runs.
    const soon = start + 20 * 60;
    await pollAt(sim, soon);
    const second = latestFire(soon, interval, offset);
    expect(sim.runs.at(-1)).toEqual({ fire: second, window: { startSeconds: first, endSeconds: second }, skipped: undefined });

    // Two hours down: only the newest 30 minutes run.
    const later = soon + 2 * HOUR;
    await pollAt(sim, later);
    const third = latestFire(later, interval, offset);
    expect(sim.runs.at(-1)?.window).toEqual({ startSeconds: third - 1800, endSeconds: third });
    expect(sim.runs.at(-1)?.skipped).toEqual({ startSeconds: second, endSeconds: third - 1800 });
    expect(await counter(sim, id)).toBe(1);
    expect((await skipRows(id)).filter((r) => r.skipped_to > 0)).toEqual([
      { fire: third, status: 'succeeded', skipped_from: second, skipped_to: third - 1800 },
    ]);
  });
});
