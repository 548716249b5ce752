import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/coordination/coordinator.js';
import { dueCountSql, dueRowsSql, dueTickSql, type DueRow, type DueTickRow } from '../../src/coordination/due-sql.js';
import { materialise, readSchedule } from '../../src/coordination/materialise.js';
import { applySchema, coordinationSettings } from '../../src/coordination/topology.js';
import { latestFire } from '../../src/schedule/arithmetic.js';
import { compileHuntFile, type HuntSpec } from '../../src/schedule/hunt-spec.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * Materialise, tombstones, run-now and the tick's due query on the real engine.
 * `{now:Int64}` drives the SQL through time without waiting for it.
 */
const SETTINGS = coordinationSettings({ kind: 'single' });
let db: TestDatabase;

function spec(id: string, interval: number): HuntSpec {
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: ${interval}}\nqueries: [SELECT 1]\n`, 0.8);
  if (result.kind !== 'hunt') throw new Error('fixture');
  return result.spec;
}

async function backlogAt(now: number): Promise<number> {
  const [row] = await queryRows<{ value: number | string }>(db, dueCountSql(db.database, { now: 'param' }), { now });
  return Number(row?.value);
}

async function tickAt(now: number) {
  const [row] = await queryRows<DueTickRow>(db, dueTickSql(db.database, { now: 'param' }), { now });
  return row;
}

beforeAll(async () => {
  db = await openTestDatabase('backlog');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterAll(async () => db?.close());
beforeEach(async () => {
  for (const t of ['hunt_schedule', 'hunt_watermark', 'hunt_lease', 'hunt_run']) {
    await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.${t}` });
  }
});

describe('materialise', () => {
  it('writes once, then nothing; changes and tombstones only what moved', async () => {
    const c = db.handle.client;
    const first = await materialise(c, db.database, [spec('a', 60), spec('b', 300)], SETTINGS);
    expect([first.added, first.changed, first.tombstoned, first.writes.length]).toEqual([2, 0, 0, 2]);
    const second = await materialise(c, db.database, [spec('a', 60), spec('b', 300)], SETTINGS);
    expect(second.writes).toHaveLength(0);
    const [{ n } = { n: 0 }] = await queryRows<{ n: number }>(db, `SELECT count() AS n FROM \`${db.database}\`.hunt_schedule`);
    expect(Number(n)).toBe(2);

    const third = await materialise(c, db.database, [spec('a', 120)], SETTINGS);
    expect([third.added, third.changed, third.tombstoned]).toEqual([0, 1, 1]);
    const rows = await readSchedule(c, db.database, SETTINGS);
    expect(rows).toEqual([
      { hunt_id: 'a', interval_seconds: 120, phase_offset: spec('a', 120).phaseOffset, enabled: 1, offset_source: 'hash' },
      { hunt_id: 'b', interval_seconds: 0, phase_offset: 0, enabled: 0, offset_source: 'hash' },
    ]);
    const fourth = await materialise(c, db.database, [spec('a', 120)], SETTINGS);
    expect(fourth.writes).toHaveLength(0);
  });

  it('a tombstoned hunt stops counting in the backlog', async () => {
    const c = db.handle.client;
    await materialise(c, db.database, [spec('a', 60), spec('b', 60)], SETTINGS);
    const now = 1_900_000_100;
    expect(await backlogAt(now)).toBe(2);
    await materialise(c, db.database, [spec('a', 60)], SETTINGS);
    expect(await backlogAt(now)).toBe(1);
    const due = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now });
    expect(due.map((r) => r.hunt_id)).toEqual(['a']);
  });
});

describe('run-now', () => {
  it('wakes an empty backlog and is served after the scheduled fire', async () => {
    const c = db.handle.client;
    const a = spec('a', 3600);
    await materialise(c, db.database, [a], SETTINGS);
    const server = new Coordinator(c, db.database, SETTINGS);
    const [{ now } = { now: 0 }] = await queryRows<{ now: number }>(db, 'SELECT toInt64(toUnixTimestamp(now())) AS now');
    const scheduled = latestFire(Number(now), 3600, a.phaseOffset);
    await server.setWatermark('a', scheduled);
    expect(await backlogAt(Number(now))).toBe(0);

    const fire = await server.requestRun('a');
    expect(fire).toBeGreaterThanOrEqual(Number(now));
    expect(await backlogAt(fire)).toBe(1);
    const [row] = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now: fire });
    expect({ id: row?.hunt_id, fire: Number(row?.fire), requested: Number(row?.requested) }).toEqual({ id: 'a', fire, requested: 1 });

    // Once a run covers the request (watermark := its fire), it stops counting.
    await server.setWatermark('a', fire);
    expect(await backlogAt(fire)).toBe(0);
  });

  it('stays owed after a failed run, like any fire, until a run covers it', async () => {
    const c = db.handle.client;
    const a = spec('a', 3600);
    await materialise(c, db.database, [a], SETTINGS);
    const server = new Coordinator(c, db.database, SETTINGS);
    const [{ now } = { now: 0 }] = await queryRows<{ now: number }>(db, 'SELECT toInt64(toUnixTimestamp(now())) AS now');
    await server.setWatermark('a', latestFire(Number(now), 3600, a.phaseOffset));
    const fire = await server.requestRun('a');
    // What the runner writes when the requested run fails (and releases): no watermark.
    await server.runRow('a', fire, 'failed', 0);
    expect(await backlogAt(fire + 1)).toBe(1);
    const [row] = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now: fire + 1 });
    expect({ id: row?.hunt_id, fire: Number(row?.fire), requested: Number(row?.requested) }).toEqual({ id: 'a', fire, requested: 1 });

    // The retry succeeds: watermark := fire, then a `succeeded` row; nothing is owed.
    await server.setWatermark('a', fire);
    await server.runRow('a', fire, 'succeeded', 1);
    expect(await backlogAt(fire + 1)).toBe(0);
  });
});

describe('the tick query', () => {
  it('returns the gate rows and the backlog at one clock reading, equal to the two builders', async () => {
    const c = db.handle.client;
    const hunts = Array.from({ length: 40 }, (_, i) => spec(`h${i}`, [2, 5, 60, 300][i % 4] ?? 60));
    await materialise(c, db.database, hunts, SETTINGS);
    const coord = new Coordinator(c, db.database, SETTINGS);
    await coord.tick(); // a ClickHouse clock reading, which lease writes are based on
    const base = 1_900_000_000;
    for (const [i, h] of hunts.entries()) {
      const fire = latestFire(base, h.intervalSeconds, h.phaseOffset);
      if (i % 3 === 0) await coord.setWatermark(h.huntId, fire);
      if (i % 5 === 0) await coord.putLease(h.huntId, 'x', fire, 100_000_000_000);
    }
    for (const now of [base, base + 1, base + 7, base + 299]) {
      const tick = await tickAt(now);
      const rows = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now });
      expect(Number(tick?.server_now)).toBe(now);
      expect(Number(tick?.backlog)).toBe(await backlogAt(now));
      expect(tick?.due.length).toBe(Number(tick?.backlog));
      const fromTick = (tick?.due ?? []).map(([id, fire, req]) => `${id}:${Number(fire)}:${Number(req)}`).sort();
      expect(fromTick).toEqual(rows.map((r) => `${r.hunt_id}:${Number(r.fire)}:${Number(r.requested)}`).sort());
      expect(fromTick.length).toBeGreaterThan(0);
    }
    // With no hunt due the tick still reads the clock.
    await c.command({ query: `TRUNCATE TABLE \`${db.database}\`.hunt_schedule` });
    const empty = await tickAt(base);
    expect([Number(empty?.server_now), Number(empty?.backlog), empty?.due]).toEqual([base, 0, []]);
  });
});
