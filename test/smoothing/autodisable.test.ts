import { capturingLogger } from '../helpers/logger.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { applySchema, coordinationSettings } from '../../src/coordination/topology.js';
import { materialise } from '../../src/coordination/materialise.js';
import { loadHuntsDir } from '../../src/schedule/hunt-files.js';
import { startRunner } from '../../src/runner/start.js';
import { enableHunt, readDisabled } from '../../src/smoothing/store/hunt-state.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { createOutputTable, outputHunt, outputRows, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * Auto-disable on the real engine (docs/smoothing.md): a hunt whose query really
 * exceeds a small max_memory_usage fails with code 241; the third such failure
 * within the window disables it (ON by default, smoothing off); the due SQL
 * skips it, re-materialise keeps it disabled, and only enable lifts it.
 */
let db: TestDatabase;
const cleanups: Array<() => Promise<void> | void> = [];
const SETTINGS = coordinationSettings({ kind: 'single' });

/** GROUP BY over 3 M distinct keys needs far more than 20 MB: MEMORY_LIMIT_EXCEEDED. */
const GREEDY = [
  'schedule: {mode: rate, interval: 1}',
  'settings: {max_memory_usage: 20000000}',
  'queries:',
  '  - SELECT count() FROM (SELECT number FROM numbers(3000000) GROUP BY number)',
  '',
].join('\n');

beforeAll(async () => {
  db = await openTestDatabase('autodisable');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOutputTable(db);
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => db?.close());

async function runRows(huntId: string) {
  return queryRows<{ status: string; error_code: number; duration_ms: number | string }>(
    db,
    `SELECT status, error_code, duration_ms FROM \`${db.database}\`.hunt_run WHERE hunt_id = {h:String} ORDER BY updated`,
    { h: huntId },
  );
}

async function metricValue(runner: { metrics: { registry: { getSingleMetricAsString(name: string): Promise<string> } } }, name: string) {
  return runner.metrics.registry.getSingleMetricAsString(name);
}

describe('auto-disable on a memory-limit crash-loop', () => {
  it('disables after 3 code-241 failures, survives re-materialise, and enable lifts it', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('greedy', GREEDY);
    hunts.write('fine', outputHunt(db.database, 'fine', 1));
    const { logger: log, lines } = capturingLogger('warn');
    const runner = await startRunner({ handle: db.handle, config: runnerConfig(db, hunts.dir), runnerId: 'r1', loop: false, log });
    cleanups.push(() => runner.stop());

    for (let i = 0; i < 3; i += 1) {
      expect((await runner.tick())?.started, `tick ${i}`).toBeGreaterThanOrEqual(1);
      await runner.idle();
      await new Promise((r) => setTimeout(r, 1_000)); // the next 1 s fire
    }
    const runs = await runRows('greedy');
    expect(runs.map((r) => [r.status, Number(r.error_code)])).toEqual([
      ['failed', 241],
      ['failed', 241],
      ['failed', 241],
    ]);
    expect(runs.every((r) => Number(r.duration_ms) > 0), 'each run records its duration').toBe(true);
    expect(await readDisabled(db.handle.client, db.database, SETTINGS)).toMatchObject([{ huntId: 'greedy', reason: 'mem_crashloop' }]);
    const warning = lines.find((l) => l.reason === 'mem_crashloop');
    expect(warning).toMatchObject({ hunt: 'greedy', level: 40 });
    expect(String(warning?.msg)).toContain('dfe-hunt-runner enable greedy');
    expect(await metricValue(runner, 'dfe_hunt_autodisabled')).toContain('dfe_hunt_autodisabled{hunt_id="greedy",reason="mem_crashloop"} 1');
    expect(await metricValue(runner, 'dfe_hunt_mem_limit_total')).toContain('dfe_hunt_mem_limit_total{hunt_id="greedy"} 3');
    expect(await metricValue(runner, 'dfe_hunt_mem_limit_crashloop_total')).toContain('{hunt_id="greedy"} 1');

    // Disabled: never due again (the healthy hunt still runs), even after re-materialise.
    await materialise(db.handle.client, db.database, loadHuntsDir(hunts.dir, 0.8).hunts, SETTINGS);
    for (let i = 0; i < 2; i += 1) {
      await runner.tick();
      await runner.idle();
      await new Promise((r) => setTimeout(r, 1_000));
    }
    expect(await runRows('greedy')).toHaveLength(3);
    expect((await outputRows(db)).filter((r) => r.hunt_id === 'fine').length).toBeGreaterThanOrEqual(4);
    expect(await readDisabled(db.handle.client, db.database, SETTINGS)).toHaveLength(1);

    // enable lifts it: the hunt is due and runs (and fails) again, and it takes 3 NEW failures to disable it again.
    await enableHunt(db.handle.client, db.database, SETTINGS, 'greedy');
    expect(await readDisabled(db.handle.client, db.database, SETTINGS)).toEqual([]);
    await runner.tick();
    await runner.idle();
    expect(await runRows('greedy')).toHaveLength(4);
    expect(await readDisabled(db.handle.client, db.database, SETTINGS), 'one new failure does not disable').toEqual([]);
  }, 120_000);

  it('DFE_HUNT_AUTODISABLE_MEM_CRASHLOOP=off never disables', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('greedy-off', GREEDY);
    const config = runnerConfig(db, hunts.dir, { DFE_HUNT_AUTODISABLE_MEM_CRASHLOOP: 'off' });
    const runner = await startRunner({ handle: db.handle, config, runnerId: 'r2', loop: false });
    cleanups.push(() => runner.stop());
    for (let i = 0; i < 3; i += 1) {
      await runner.tick();
      await runner.idle();
      await new Promise((r) => setTimeout(r, 1_000));
    }
    expect((await runRows('greedy-off')).length).toBe(3);
    expect((await readDisabled(db.handle.client, db.database, SETTINGS)).map((d) => d.huntId)).not.toContain('greedy-off');
  }, 120_000);

  it('an opt-in ceiling disables a hunt whose p95 crosses it, with its own reason (smoothing off)', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('slowpoke', outputHunt(db.database, 'slowpoke', 1, { sleepSeconds: 0.5 }));
    const config = runnerConfig(db, hunts.dir, { DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS: '100' });
    const { logger: log, lines } = capturingLogger('warn');
    const runner = await startRunner({ handle: db.handle, config, runnerId: 'r3', loop: false, log });
    cleanups.push(() => runner.stop());
    await runner.tick();
    await runner.idle();
    expect((await readDisabled(db.handle.client, db.database, SETTINGS)).find((d) => d.huntId === 'slowpoke')).toMatchObject({ reason: 'ceiling_duration' });
    expect(lines.find((l) => l.hunt === 'slowpoke')).toMatchObject({ reason: 'ceiling_duration', resource: 'duration' });
    expect(await metricValue(runner, 'dfe_hunt_threshold_breach_total')).toContain('{hunt_id="slowpoke",resource="duration"} 1');
    await new Promise((r) => setTimeout(r, 1_000));
    await runner.tick();
    await runner.idle();
    expect((await outputRows(db)).filter((r) => r.hunt_id === 'slowpoke')).toHaveLength(1);
    await enableHunt(db.handle.client, db.database, SETTINGS, 'slowpoke');
    expect((await readDisabled(db.handle.client, db.database, SETTINGS)).map((d) => d.huntId)).not.toContain('slowpoke');
  }, 60_000);

  it('a per-hunt ceiling in the hunt file disables that hunt alone, with its reason; enable lifts it', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    // Same 0.5 s query in both; only "tight" sets a ceiling (no global one is set).
    hunts.write('tight', `${outputHunt(db.database, 'tight', 1, { sleepSeconds: 0.5 })}ceilings: {duration_ms: 100}\n`);
    hunts.write('loose', outputHunt(db.database, 'loose', 1, { sleepSeconds: 0.5 }));
    const { logger: log, lines } = capturingLogger('warn');
    const runner = await startRunner({ handle: db.handle, config: runnerConfig(db, hunts.dir), runnerId: 'r4', loop: false, log });
    cleanups.push(() => runner.stop());
    await runner.tick();
    await runner.idle();
    const disabled = await readDisabled(db.handle.client, db.database, SETTINGS);
    expect(disabled.find((d) => d.huntId === 'tight')).toMatchObject({ reason: 'ceiling_duration' });
    expect(disabled.map((d) => d.huntId)).not.toContain('loose');
    expect(lines.find((l) => l.hunt === 'tight')).toMatchObject({ reason: 'ceiling_duration', resource: 'duration' });
    expect(await metricValue(runner, 'dfe_hunt_threshold_breach_total')).toContain('{hunt_id="tight",resource="duration"} 1');
    await new Promise((r) => setTimeout(r, 1_000));
    await runner.tick();
    await runner.idle();
    const out = await outputRows(db);
    expect(out.filter((r) => r.hunt_id === 'tight'), 'disabled: not run again').toHaveLength(1);
    expect(out.filter((r) => r.hunt_id === 'loose')).toHaveLength(2);
    await enableHunt(db.handle.client, db.database, SETTINGS, 'tight');
    expect((await readDisabled(db.handle.client, db.database, SETTINGS)).map((d) => d.huntId)).not.toContain('tight');
    await new Promise((r) => setTimeout(r, 1_000));
    await runner.tick();
    await runner.idle();
    expect((await outputRows(db)).filter((r) => r.hunt_id === 'tight'), 'enabled: due and run again').toHaveLength(2);
  }, 60_000);

  it('a per-hunt ceiling replaces the global one for that hunt', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('exempt', `${outputHunt(db.database, 'exempt', 1, { sleepSeconds: 0.5 })}ceilings: {duration_ms: 60000}\n`);
    hunts.write('capped', outputHunt(db.database, 'capped', 1, { sleepSeconds: 0.5 }));
    const config = runnerConfig(db, hunts.dir, { DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS: '100' });
    const runner = await startRunner({ handle: db.handle, config, runnerId: 'r5', loop: false });
    cleanups.push(() => runner.stop());
    await runner.tick();
    await runner.idle();
    const disabled = await readDisabled(db.handle.client, db.database, SETTINGS);
    expect(disabled.find((d) => d.huntId === 'capped')).toMatchObject({ reason: 'ceiling_duration' });
    expect(disabled.map((d) => d.huntId)).not.toContain('exempt');
  }, 60_000);
});
