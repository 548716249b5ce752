import { describe, expect, it } from 'vitest';
import { readBackVerdict } from '../../../src/coordination/claims/table-claims.js';
import { materialiseSummary, planMaterialise, type OffsetSource } from '../../../src/coordination/materialise.js';
import { compileHuntFile, type HuntSpec } from '../../../src/schedule/hunt-spec.js';

/** Pure decisions of coordination: the claim's read-back verdict, the materialise diff (tick planning: test/schedule/plan.test.ts). */

function spec(id: string, interval: number, pinned?: number): HuntSpec {
  const pin = pinned === undefined ? '' : `, phase_offset: ${pinned}`;
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: ${interval}${pin}}\nqueries: [SELECT 1]\n`, 0.8);
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
  const row = (id: string, interval: number, offset: number, enabled = 1, source: OffsetSource = 'hash') => ({
    hunt_id: id,
    interval_seconds: interval,
    phase_offset: offset,
    enabled,
    offset_source: source,
  });

  it('adds, changes, tombstones, and leaves equal rows alone', () => {
    const a = spec('a', 60);
    const b = spec('b', 300);
    const c = spec('c', 60);
    const current = [row('a', 60, a.phaseOffset), row('b', 60, 1), row('old', 60, 5), row('dead', 0, 0, 0), row('c', 0, 0, 0)];
    const plan = planMaterialise(current, [a, b, c]);
    expect(plan.writes).toEqual([row('b', 300, b.phaseOffset), row('c', 60, c.phaseOffset), row('old', 0, 0, 0)]);
    expect(materialiseSummary(plan, 'dfe')).toBe('materialised 3 hunt(s) into dfe.hunt_schedule (1 added, 1 changed, 1 tombstoned)');
    expect(materialiseSummary({ ...plan, keeperKeysDeleted: 0 }, 'dfe')).toBe('materialised 3 hunt(s) into dfe.hunt_schedule (1 added, 1 changed, 1 tombstoned)');
    expect(materialiseSummary({ ...plan, keeperKeysDeleted: 2 }, 'dfe')).toBe(
      'materialised 3 hunt(s) into dfe.hunt_schedule (1 added, 1 changed, 1 tombstoned; 2 Keeper key(s) of removed hunts deleted)',
    );
  });

  it('keeps a learned offset, and rehashes it only when the interval changes', () => {
    const a = spec('a', 60);
    const learned = row('a', 60, 17, 1, 'learned');
    expect(planMaterialise([learned], [a]).writes).toEqual([]);
    expect(planMaterialise([row('a', 60, 17)], [a]).writes).toEqual([]);
    expect(planMaterialise([learned], [spec('a', 120)]).writes).toEqual([row('a', 120, spec('a', 120).phaseOffset)]);
  });

  it('writes a pinned offset, and the hash again when the pin is removed', () => {
    const pinned = spec('a', 900, 412);
    expect(pinned.phaseOffset).toBe(412);
    const plan = planMaterialise([row('a', 900, 7, 1, 'learned')], [pinned]);
    expect(plan.writes).toEqual([row('a', 900, 412, 1, 'pinned')]);
    expect(plan.changed).toBe(1);
    expect(plan.promoted).toEqual([]);
    // A settled learned offset exported into the file comes back pinned at the same offset: a promotion.
    expect(planMaterialise([row('a', 900, 412, 1, 'learned')], [pinned]).promoted).toEqual(['a']);
    expect(planMaterialise([row('a', 900, 412, 1, 'pinned')], [pinned]).writes).toEqual([]);
    const unpinned = spec('a', 900);
    expect(planMaterialise([row('a', 900, 412, 1, 'pinned')], [unpinned]).writes).toEqual([row('a', 900, unpinned.phaseOffset)]);
  });

  it('keeps a backed-off interval (2×, 4×, 8× and marked) with its offset', () => {
    const a = spec('a', 60);
    const backed = row('a', 240, 100, 1, 'learned');
    expect(planMaterialise([backed], [a], new Set(['a'])).writes).toEqual([]);
    // Unmarked, or not a power-of-two multiple up to 8×: the configured interval wins.
    expect(planMaterialise([backed], [a]).writes).toEqual([row('a', 60, a.phaseOffset)]);
    expect(planMaterialise([row('a', 960, 100, 1, 'learned')], [a], new Set(['a'])).writes).toEqual([row('a', 60, a.phaseOffset)]);
  });
});

describe('pinned phase_offset in a hunt file', () => {
  it.each([[-1], [900], [1.5], ['"412"']])('rejects %j naming the file, key and value', (value) => {
    const result = compileHuntFile('/h/p.yaml', `schedule: {mode: rate, interval: 15m, phase_offset: ${value}}\nqueries: [SELECT 1]\n`, 0.8);
    expect(result).toMatchObject({ kind: 'invalid', file: '/h/p.yaml', key: 'schedule.phase_offset' });
    expect(result.kind === 'invalid' && result.reason).toContain(String(value).replace(/"/g, ''));
    expect(result.kind === 'invalid' && result.reason).toContain('0 ≤ offset < interval (900)');
  });
});
