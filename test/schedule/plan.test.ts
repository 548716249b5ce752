import { describe, expect, it } from 'vitest';
import { overrunFire, planTick } from '../../src/schedule/plan.js';
import { compileHuntFile, type HuntSpec } from '../../src/schedule/hunt-spec.js';

/** Pure tick planning (the read-back verdict and the materialise diff: test/coordination/pure-decisions.test.ts). */

function spec(id: string, interval: number): HuntSpec {
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: ${interval}}\nqueries: [SELECT 1]\n`, 0.8);
  if (result.kind !== 'hunt') throw new Error('fixture');
  return result.spec;
}

describe('planTick', () => {
  const SCHEDULE = { intervalSeconds: 60, phaseOffset: 43 };
  const hunts = new Map(['a', 'b', 'c', 'd'].map((id) => [id, spec(id, 60)]));
  const snapshot = {
    serverNow: 1000,
    backlog: 5,
    due: [
      { huntId: 'a', fire: 990, requested: false, ...SCHEDULE },
      { huntId: 'b', fire: 900, requested: false, ...SCHEDULE },
      { huntId: 'c', fire: 950, requested: true, ...SCHEDULE },
      { huntId: 'd', fire: 950, requested: false, ...SCHEDULE },
      { huntId: 'gone', fire: 800, requested: false, ...SCHEDULE },
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

  it('takes interval and offset from the table (the due row), not from the file', () => {
    const plan = planTick({ serverNow: 1000, backlog: 1, due: [{ huntId: 'a', fire: 970, requested: false, intervalSeconds: 120, phaseOffset: 10 }] }, hunts, new Set(), 8);
    expect(plan.start[0]).toMatchObject({ intervalSeconds: 120, phaseOffset: 10 });
    // A learned offset of 10 s: the overrun follows it, not the file's hash (43).
    const learned = { intervalSeconds: 60, phaseOffset: 10 };
    expect(overrunFire(learned, 1_900_000_030, 1_900_000_089)).toBeUndefined();
    expect(overrunFire(learned, 1_900_000_030, 1_900_000_090)).toBe(1_900_000_090);
  });
});

describe('aging over capacity (docs/runner.md#progress)', () => {
  const SCHEDULE = { intervalSeconds: 10, phaseOffset: 0 };
  const ids = ['a', 'b', 'c', 'd', 'e'];
  const hunts = new Map(ids.map((id) => [id, spec(id, 10)]));

  /**
   * One runner, cap 1, every hunt due every tick, a run done within its tick. `aging`: the due
   * rows carry where each owed window starts (the watermark), as the due query does; without
   * it the plan sees only the latest fire (the baseline). Returns the ticks each hunt ran at.
   */
  function simulate(aging: boolean, ticks: number): Map<string, number[]> {
    const watermark = new Map<string, number>(ids.map((id) => [id, 0]));
    const ran = new Map<string, number[]>(ids.map((id) => [id, []]));
    for (let k = 1; k <= ticks; k += 1) {
      const fire = 10 * k;
      const due = ids
        .filter((id) => (watermark.get(id) ?? 0) < fire)
        .map((huntId) => ({ huntId, fire, requested: false, ...SCHEDULE, ...(aging ? { owedFrom: watermark.get(huntId) ?? 0 } : {}) }));
      const plan = planTick({ serverNow: fire + 5, backlog: due.length, due }, hunts, new Set(), 1, 'runner-1');
      for (const p of plan.start) {
        watermark.set(p.spec.huntId, fire);
        ran.get(p.spec.huntId)?.push(k);
      }
    }
    return ran;
  }

  it('without aging, one hunt wins every tie and the others starve (the baseline)', () => {
    const ran = simulate(false, 20);
    expect([...ran.values()].filter((ticks) => ticks.length === 0).length).toBe(ids.length - 1);
  });

  it('with aging, the longest-owed hunt goes first: each of 5 hunts runs every 5th tick with room for 1', () => {
    const ran = simulate(true, 20);
    for (const [id, ticks] of ran) {
      expect(ticks.length, id).toBe(4);
      const gaps = ticks.slice(1).map((t, i) => t - (ticks[i] as number));
      expect(gaps.every((g) => g === ids.length), id).toBe(true);
    }
  });
});
