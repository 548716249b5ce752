import { describe, expect, it } from 'vitest';
import { readBackVerdict } from '../../src/coordination/claim.js';
import { materialiseSummary, planMaterialise } from '../../src/coordination/materialise.js';
import { compileHuntFile, type HuntSpec } from '../../src/schedule/hunt-spec.js';

/** Pure decisions of coordination: the claim's read-back verdict, the materialise diff (tick planning: test/schedule/plan.test.ts). */

function spec(id: string, interval: number): HuntSpec {
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: ${interval}}\nqueries: [SELECT 1]\n`, 0.8);
  if (result.kind !== 'hunt') throw new Error('fixture');
  return result.spec;
}

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
