import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchema, coordinationSettings } from '../../src/coordination/topology.js';
import { startRunner } from '../../src/runner/start.js';
import { writeScheduleMove } from '../../src/smoothing/store/fleet.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { capturingLogger } from '../helpers/logger.js';
import { runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * Observe-only smoothing (docs/smoothing.md, "Off, observe, on") on the real
 * engine: one planning cycle publishes the load gauges and the projected
 * flatness, logs what the planner would move, and writes nothing.
 */
const SETTINGS = coordinationSettings({ kind: 'single' });
const IDS = ['o1', 'o2', 'o3', 'o4'];
let db: TestDatabase;
const hunts = tempHuntsDir();

beforeAll(async () => {
  db = await openTestDatabase('observe');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  for (const id of IDS) hunts.write(id, 'schedule: {mode: rate, interval: 300}\nqueries: [SELECT 1]\n');
  // Everyone on one phase, each run 20 s of one core: a pile-up the planner wants to spread.
  for (const id of IDS) await writeScheduleMove(db.handle.client, db.database, SETTINGS, { huntId: id, intervalSeconds: 300, phaseOffset: 0 });
  await db.handle.client.insert({
    table: `\`${db.database}\`.hunt_run`,
    values: IDS.flatMap((id) => [1, 2, 3].map((k) => ({ hunt_id: id, fire: k, status: 'succeeded', rows_written: 0, duration_ms: 20_000, cpu_us: 0, memory_bytes: 0, error_code: 0 }))),
    format: 'JSONEachRow',
  });
});
afterAll(async () => {
  hunts.remove();
  await db?.close();
});

const scheduleRows = async () =>
  queryRows<{ hunt_id: string; phase_offset: number; offset_source: string }>(
    db,
    `SELECT hunt_id, phase_offset, offset_source FROM \`${db.database}\`.hunt_schedule ORDER BY hunt_id, updated, phase_offset`,
  );

const SMOOTHING_ENV = {
  DFE_HUNT_SMOOTHING_COOLDOWN_CYCLES: '0',
  DFE_HUNT_SMOOTHING_CPU_CORES: '1',
  DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES: '1000000000',
  LOG_LEVEL: 'info',
};

describe('smoothing observe', () => {
  it('publishes the load gauges and the projected flatness, logs the moves it would make, writes no offset', async () => {
    const config = runnerConfig(db, hunts.dir, { ...SMOOTHING_ENV, DFE_HUNT_SMOOTHING: 'observe' });
    const { logger: log, lines } = capturingLogger();
    const runner = await startRunner({ handle: db.handle, config, log, loop: false, runnerId: 'observer' });
    const before = (await scheduleRows()).filter((r) => IDS.includes(r.hunt_id));
    try {
      await runner.tick();
      const outcome = await runner.lastPlanningCycle();
      expect(outcome?.kind).toBe('observed');
      if (outcome?.kind !== 'observed') return;
      expect(outcome.wouldMove.length).toBeGreaterThan(0);
      expect(outcome.projectedFlatness).toBeLessThan(outcome.flatness);

      const gauge = async (name: string) => (await runner.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
      const pressure = new Map((await gauge('dfe_hunt_load_pressure')).map((v) => [v.labels.stat, v.value]));
      expect(pressure.get('peak')).toBeGreaterThan(0);
      expect(pressure.get('flatness')).toBeCloseTo(outcome.flatness, 9);
      expect((await gauge('dfe_hunt_load_cpu')).length).toBe(3);
      expect((await gauge('dfe_hunt_smoothing_projected_flatness'))[0]?.value).toBeCloseTo(outcome.projectedFlatness, 9);
      expect((await gauge('dfe_hunt_phase_offset')).map((v) => v.labels.hunt_id).sort()).toEqual(IDS);

      const line = lines.find((l) => String(l.msg).startsWith('smoothing (observe): would move'));
      expect(line, JSON.stringify(lines.map((l) => l.msg))).toMatchObject({ wouldMove: outcome.wouldMove.length });
      expect(String(line?.msg)).toContain('nothing written');
    } finally {
      await runner.stop();
    }
    // The planner wrote no schedule row: no learned offset, no back-off.
    expect((await scheduleRows()).filter((r) => IDS.includes(r.hunt_id))).toEqual(before);
    // Each hunt's counter exists from the start (issue 28) and stays 0: observe moved nothing.
    const shifts = (await runner.metrics.registry.getSingleMetric('dfe_hunt_phase_shift_total')?.get())?.values ?? [];
    expect(shifts.filter((v) => IDS.includes(String(v.labels.hunt_id))).map((v) => v.value)).toEqual(IDS.map(() => 0));
  });

  it('off: no planning cycle, and the load gauges stay at their initial 0', async () => {
    const config = runnerConfig(db, hunts.dir, { ...SMOOTHING_ENV, DFE_HUNT_SMOOTHING: 'off' });
    const runner = await startRunner({ handle: db.handle, config, loop: false, runnerId: 'off' });
    try {
      await runner.tick();
      expect(await runner.lastPlanningCycle()).toBeUndefined();
      const load = (await runner.metrics.registry.getSingleMetric('dfe_hunt_load_pressure')?.get())?.values ?? [];
      expect(load.map((v) => [v.labels.stat, v.value])).toEqual([
        ['peak', 0],
        ['mean', 0],
        ['flatness', 0],
      ]);
    } finally {
      await runner.stop();
    }
  });
});
