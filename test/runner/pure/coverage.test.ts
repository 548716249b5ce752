import { describe, expect, it } from 'vitest';
import { coverage, fireStarts, latestFires, quantile } from '../../../src/runner/coverage.js';

/** The pure counting of verify-coordination (docs/operations.md#verify-coordination). */
const hunt = (windows: Array<[number, number]>, intervalSeconds = 10) => ({
  huntId: 'h',
  intervalSeconds,
  phaseOffset: 0,
  windows: windows.map(([start, end]) => ({ start, end })),
});

describe('coverage', () => {
  it('contiguous windows cover each owed fire once; a folded window counts its fires as folded, not missed', () => {
    const c = coverage([hunt([[90, 100], [100, 110], [110, 130]])], 0, 130);
    expect(c).toEqual({ owed: 4, ownRun: 3, missed: 0, unrun: 0, doubled: 0, overlaps: 0, examples: [] });
  });

  it('a gap is a miss; an overlap or a repeated fire is a double', () => {
    expect(coverage([hunt([[90, 100], [110, 120]])], 0, 120)).toMatchObject({ owed: 3, missed: 1, unrun: 0, doubled: 0, examples: ['h@110×0'] });
    expect(coverage([hunt([[90, 100], [90, 110]])], 0, 110)).toMatchObject({ missed: 0, doubled: 1, examples: ['h@100×2'] });
    expect(coverage([hunt([[90, 100], [90, 100]])], 0, 100)).toMatchObject({ doubled: 1, overlaps: 1 });
  });

  it('two windows of one hunt that intersect are an overlapping pair; windows that only touch are not', () => {
    // The case: (1708, 1774] and (1708, 1825] run 180 ms apart.
    expect(coverage([hunt([[1708, 1774], [1708, 1825]], 1)], 0, 1825)).toMatchObject({ overlaps: 1, doubled: 66, missed: 0 });
    expect(coverage([hunt([[90, 100], [100, 110], [105, 130], [120, 140]])], 0, 140)).toMatchObject({ overlaps: 2 });
    expect(coverage([hunt([[90, 100], [100, 110]])], 0, 110)).toMatchObject({ overlaps: 0 });
  });

  it('fires after the last run up to the end are missed; a hunt that never ran owes every fire after the start', () => {
    expect(coverage([hunt([[90, 100]])], 0, 120)).toMatchObject({ owed: 3, missed: 2, unrun: 2 });
    expect(coverage([hunt([])], 95, 130)).toMatchObject({ owed: 4, missed: 4, unrun: 4 });
  });

  it('lateness per owed fire: the start of the first run covering it, minus the fire; a folded fire waited for the later run', () => {
    const h = { huntId: 'h', intervalSeconds: 10, phaseOffset: 0, windows: [{ start: 90, end: 100, runStart: 101 }, { start: 100, end: 130, runStart: 131.5 }, { start: 130, end: 140 }] };
    expect(fireStarts([h], 0, 140).map((f) => f.seconds)).toEqual([1, 21.5, 11.5, 1.5]);
  });

  it('the latest fires name their hunt, fire and run start, latest first, ties in hunt and fire order', () => {
    const h = { huntId: 'h', intervalSeconds: 10, phaseOffset: 0, windows: [{ start: 90, end: 100, runStart: 101 }, { start: 100, end: 130, runStart: 131.5 }] };
    const g = { ...h, huntId: 'g' };
    const latest = latestFires(fireStarts([h, g], 0, 130), 3);
    expect(latest).toEqual([
      { huntId: 'g', fire: 110, runStart: 131.5, seconds: 21.5 },
      { huntId: 'h', fire: 110, runStart: 131.5, seconds: 21.5 },
      { huntId: 'g', fire: 120, runStart: 131.5, seconds: 11.5 },
    ]);
  });

  it('quantile by nearest rank', () => {
    expect(quantile([], 0.5)).toBeUndefined();
    expect(quantile([3, 1, 2, 4], 0.5)).toBe(2);
    expect(quantile([3, 1, 2, 4], 0.99)).toBe(4);
  });
});
