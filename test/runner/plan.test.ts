import { describe, expect, it } from 'vitest';
import { readBackVerdict } from '../../src/coordination/claim.js';
import { materialiseSummary, planMaterialise } from '../../src/coordination/materialise.js';
import { overrunFire, planTick } from '../../src/schedule/plan.js';
import { compileHuntFile, type HuntSpec } from '../../src/schedule/hunt-spec.js';

/** Pure decisions of the runner: tick planning, the read-back verdict, the materialise diff. */

function spec(id: string, interval: number): HuntSpec {
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: ${interval}}\nqueries: [SELECT 1]\n`, 0.8);
  if (result.kind !== 'hunt') throw new Error('fixture');
  return result.spec;
}

describe('planTick', () => {
  const hunts = new Map(['a', 'b', 'c', 'd'].map((id) => [id, spec(id, 60)]));
  const snapshot = {
    serverNow: 1000,
    backlog: 5,
    due: [
      { huntId: 'a', fire: 990, requested: false },
      { huntId: 'b', fire: 900, requested: false },
      { huntId: 'c', fire: 950, requested: true },
      { huntId: 'd', fire: 950, requested: false },
      { huntId: 'gone', fire: 800, requested: false },
    ],
  };

  it('starts the most overdue first, up to the cap, skipping unknown and in-flight hunts', () => {
    const plan = planTick(snapshot, hunts, new Set(['c']), 3);
    expect(plan.start.map((p) => [p.spec.huntId, p.fire, p.latenessSeconds])).toEqual([
      ['b', 900, 100],
      ['d', 950, 50],
    ]);
    expect(plan.unknown).toEqual(['gone']);
    expect(plan.deferred).toBe(1);
  });

  it('starts nothing when the cap is taken', () => {
    expect(planTick(snapshot, hunts, new Set(['a', 'b']), 2).start).toEqual([]);
  });

  it('names an overrun only when a newer fire is due than the one running', () => {
    const s = spec('a', 60); // offset 43
    expect(overrunFire(s, 1_900_000_003, 1_900_000_062)).toBeUndefined();
    expect(overrunFire(s, 1_900_000_003, 1_900_000_063)).toBe(1_900_000_063);
  });
});

describe('readBackVerdict', () => {
  const row = (owner: string, fire: number, claimed: string) => ({ owner, fire, leaseUntil: 2000, claimed });

  it('wins only with our owner and fire on top', () => {
    expect(readBackVerdict([row('me', 10, 't2'), row('you', 10, 't1')], 'me', 10, 5)).toEqual({ kind: 'won', watermark: 5 });
    expect(readBackVerdict([row('you', 10, 't2'), row('me', 10, 't1')], 'me', 10).kind).toBe('lost');
    expect(readBackVerdict([row('me', 9, 't2')], 'me', 10).kind).toBe('lost');
    expect(readBackVerdict([], 'me', 10).kind).toBe('lost');
  });

  it('loses a tie on claimed, since a merge may keep either row', () => {
    expect(readBackVerdict([row('a', 10, 't1'), row('b', 10, 't1')], 'a', 10).kind).toBe('lost');
  });
});

describe('planMaterialise', () => {
  const row = (id: string, interval: number, offset: number, enabled = 1) => ({
    hunt_id: id,
    interval_seconds: interval,
    phase_offset: offset,
    enabled,
  });

  it('adds, changes, tombstones, and leaves equal rows alone', () => {
    const a = spec('a', 60);
    const b = spec('b', 300);
    const c = spec('c', 60);
    const current = [row('a', 60, a.phaseOffset), row('b', 60, 1), row('old', 60, 5), row('dead', 0, 0, 0), row('c', 0, 0, 0)];
    const plan = planMaterialise(current, [a, b, c]);
    expect(plan.writes).toEqual([row('b', 300, b.phaseOffset), row('c', 60, c.phaseOffset), row('old', 0, 0, 0)]);
    expect(materialiseSummary(plan, 'dfe')).toBe('materialised 3 hunt(s) into dfe.hunt_schedule (1 added, 1 changed, 1 tombstoned)');
  });
});
