import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smoothingVerb } from '../../src/smoothing/control/operator.js';
import { loadHuntsDir } from '../../src/schedule/hunt-files.js';
import { materialise } from '../../src/coordination/materialise.js';
import { applySchema, coordinationSettings } from '../../src/coordination/topology.js';
import { costFromRuns } from '../../src/smoothing/cost.js';
import { probeCostSource, readCosts } from '../../src/smoothing/store/cost-source.js';
import { readScheduleEntries, writeScheduleMove } from '../../src/smoothing/store/fleet.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/** The smoothing I/O on the real engine: the cost model's SQL, export into hunt files, promotion. */
const SETTINGS = coordinationSettings({ kind: 'single' });
let db: TestDatabase;
const hunts = tempHuntsDir();

beforeAll(async () => {
  db = await openTestDatabase('fleetio');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterAll(async () => {
  hunts.remove();
  await db?.close();
});

describe('the cost model', () => {
  it('uses hunt_run on the embedded engine (no query_log), with the same p95 as the core', async () => {
    expect(await probeCostSource(db.handle.client)).toBe('hunt_run');
    const samples = Array.from({ length: 23 }, (_, i) => ({
      durationMs: 10 + ((i * 37) % 101),
      cpuUs: i % 3 === 0 ? 0 : 5_000 + ((i * 13) % 50) * 1000,
      memoryBytes: 1_000_000 + ((i * 7) % 23) * 100_000,
    }));
    await db.handle.client.insert({
      table: `\`${db.database}\`.hunt_run`,
      values: [
        ...samples.map((s, i) => ({
          hunt_id: 'costly',
          fire: 1_000 + i,
          status: i % 5 === 0 ? 'failed' : 'succeeded',
          rows_written: 0,
          duration_ms: s.durationMs,
          cpu_us: s.cpuUs,
          memory_bytes: s.memoryBytes,
          error_code: 0,
        })),
        // A run-now request and a row from before the cost columns: no samples.
        { hunt_id: 'costly', fire: 5_000, status: 'requested', rows_written: 0, duration_ms: 0, cpu_us: 0, memory_bytes: 0, error_code: 0 },
        { hunt_id: 'costly', fire: 5_001, status: 'succeeded', rows_written: 0, duration_ms: 0, cpu_us: 0, memory_bytes: 0, error_code: 0 },
      ],
      format: 'JSONEachRow',
    });
    const measured = await readCosts(db.handle.client, db.database, SETTINGS, 'hunt_run', 86_400);
    expect(measured.costs.get('costly')).toEqual(costFromRuns(samples));
    expect(measured.runs.get('costly')).toBe(samples.length);
  });
});

describe('smoothing export', () => {
  it('writes settled learned offsets into the files, keeping comments and key order; materialise then promotes them', async () => {
    const text = [
      '# Brute force over SSH: tuned by the SOC, keep this comment',
      'description: ssh',
      'schedule: {mode: rate, interval: 15m} # every quarter hour',
      'queries:',
      '  - SELECT 1 # the query',
      'settings: {max_threads: 2}',
      '',
    ].join('\n');
    hunts.write('ssh', text);
    hunts.write('fresh', 'schedule: {mode: rate, interval: 5m}\nqueries: [SELECT 2]\n');
    await materialise(db.handle.client, db.database, loadHuntsDir(hunts.dir, 0.8).hunts, SETTINGS);
    await writeScheduleMove(db.handle.client, db.database, SETTINGS, { huntId: 'ssh', intervalSeconds: 900, phaseOffset: 412 });
    await new Promise((r) => setTimeout(r, 2_200)); // settled: ≥ 1 s by the server clock, read in whole seconds

    const config = runnerConfig(db, hunts.dir, { DFE_HUNT_SMOOTHING_SETTLING_SECONDS: '1' });
    const scope = { config, handle: db.handle, settings: SETTINGS };
    const options = { json: false, cycles: 1 };
    expect(await smoothingVerb(scope, 'export', options)).toContain('exported 1 settled offset(s) of 1 settled hunt(s)');
    const written = readFileSync(join(hunts.dir, 'ssh.yaml'), 'utf8');
    expect(written).toContain('# Brute force over SSH: tuned by the SOC, keep this comment');
    expect(written).toContain('# every quarter hour');
    expect(written).toContain('# the query');
    expect(written).toMatch(/schedule: \{ mode: rate, interval: 15m, phase_offset: 412 \}/);
    const keys = written.split('\n').filter((l) => /^[a-z_]+:/.test(l)).map((l) => l.split(':')[0]);
    expect(keys).toEqual(['description', 'schedule', 'queries', 'settings']);
    expect(readFileSync(join(hunts.dir, 'fresh.yaml'), 'utf8')).not.toContain('phase_offset');

    // A second export writes nothing; materialise turns the learned offset into a pinned one (a promotion).
    expect(await smoothingVerb(scope, 'export', options)).toContain('exported 0 settled offset(s)');
    const plan = await materialise(db.handle.client, db.database, loadHuntsDir(hunts.dir, 0.8).hunts, SETTINGS);
    expect(plan.promoted).toEqual(['ssh']);
    const entry = (await readScheduleEntries(db.handle.client, db.database, SETTINGS)).find((e) => e.huntId === 'ssh');
    expect(entry).toMatchObject({ phaseOffset: 412, offsetSource: 'pinned' });

    const status = JSON.parse(await smoothingVerb(scope, 'status', { ...options, json: true })) as { hunts: Array<{ hunt_id: string; offset_source: string }> };
    expect(status.hunts.find((h) => h.hunt_id === 'ssh')?.offset_source).toBe('pinned');
  });
});

describe('smoothing plan and apply', () => {
  it('plan writes nothing; apply writes the planned final offsets as learned rows', async () => {
    const dir = tempHuntsDir();
    const ids = ['p1', 'p2', 'p3', 'p4'];
    for (const id of ids) dir.write(id, 'schedule: {mode: rate, interval: 300}\nqueries: [SELECT 1]\n');
    const database = db.database;
    const client = db.handle.client;
    for (const table of ['hunt_schedule', 'hunt_run', 'hunt_state']) await client.command({ query: `TRUNCATE TABLE \`${database}\`.${table}` });
    await materialise(client, database, loadHuntsDir(dir.dir, 0.8).hunts, SETTINGS);
    // Everyone on the same phase, each run 20 s of one core.
    for (const id of ids) await writeScheduleMove(client, database, SETTINGS, { huntId: id, intervalSeconds: 300, phaseOffset: 0 });
    await client.insert({
      table: `\`${database}\`.hunt_run`,
      values: ids.flatMap((id) => [1, 2, 3].map((k) => ({ hunt_id: id, fire: k, status: 'succeeded', rows_written: 0, duration_ms: 20_000, cpu_us: 0, memory_bytes: 0, error_code: 0 }))),
      format: 'JSONEachRow',
    });
    const config = runnerConfig(db, dir.dir, { DFE_HUNT_SMOOTHING_COOLDOWN_CYCLES: '0', DFE_HUNT_SMOOTHING_CPU_CORES: '1', DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES: '1000000000' });
    const scope = { config, handle: db.handle, settings: SETTINGS };
    const before = await readScheduleEntries(client, database, SETTINGS);
    type Report = { moves: unknown[]; before: { flatness: number; objective: number }; after: { flatness: number; offsets: Record<string, number> } };
    const plan = JSON.parse(await smoothingVerb(scope, 'plan', { json: true, cycles: 20 })) as Report;
    expect(plan.moves.length, JSON.stringify({ j: plan.before.objective, after: plan.after })).toBeGreaterThan(0);
    expect(plan.after.flatness).toBeLessThan(plan.before.flatness);
    expect(await readScheduleEntries(client, database, SETTINGS)).toEqual(before);

    expect(await smoothingVerb(scope, 'apply', { json: false, cycles: 20 })).toMatch(/applied \d+ learned offset\(s\)/);
    const after = await readScheduleEntries(client, database, SETTINGS);
    const finalOffsets = new Map(Object.entries(plan.after.offsets));
    for (const e of after) expect(e.phaseOffset, e.huntId).toBe(finalOffsets.get(e.huntId));
    expect(after.filter((e) => e.phaseOffset !== 0).every((e) => e.offsetSource === 'learned')).toBe(true);
    // Learned offsets survive a re-materialise, which writes nothing.
    const again = await materialise(client, database, loadHuntsDir(dir.dir, 0.8).hunts, SETTINGS);
    expect(again.writes).toEqual([]);
    dir.remove();
  });
});
