import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { latestFire } from '../../src/schedule/arithmetic.js';
import { boundedRunWindow, effectiveMaxCatchup } from '../../src/schedule/catchup.js';
import { compileHuntFile } from '../../src/schedule/hunt-spec.js';

/** docs/hunts.md#catch-up: the window of a run after an outage is bounded, and what is left out is named. */
const HOUR = 3600;
const DAY = 86_400;

describe('bounded catch-up window', () => {
  it('an ordinary run, or a short outage, keeps the whole window', () => {
    expect(boundedRunWindow(10_000, 9_940, 60, DAY)).toEqual({ window: { startSeconds: 9_940, endSeconds: 10_000 }, skipped: undefined });
    expect(boundedRunWindow(10_000, null, 60, DAY)).toEqual({ window: { startSeconds: 9_940, endSeconds: 10_000 }, skipped: undefined });
    // Exactly max_catchup behind: nothing is skipped (the bound is inclusive).
    expect(boundedRunWindow(DAY * 3, DAY * 2, 60, DAY).skipped).toBeUndefined();
  });

  it('after an outage longer than max_catchup, runs the newest max_catchup and names the rest', () => {
    const clock = new ManualClock(1_900_000_000_000);
    const interval = 300;
    const offset = 17;
    const before = latestFire(clock.nowMs() / 1000, interval, offset);
    clock.advance(3 * DAY * 1000 + 42_000); // three days down
    const fire = latestFire(clock.nowMs() / 1000, interval, offset);
    const { window, skipped } = boundedRunWindow(fire, before, interval, DAY);
    expect(window).toEqual({ startSeconds: fire - DAY, endSeconds: fire });
    expect(skipped).toEqual({ startSeconds: before, endSeconds: fire - DAY });
    // Skipped and run ranges tile the whole gap: nothing is lost silently, nothing overlaps.
    expect((skipped?.endSeconds ?? 0) - (skipped?.startSeconds ?? 0) + window.endSeconds - window.startSeconds).toBe(fire - before);
  });

  it('never cuts a window below one interval, whatever the bound', () => {
    expect(boundedRunWindow(100 * DAY, 90 * DAY, 2 * DAY, HOUR)).toEqual({
      window: { startSeconds: 98 * DAY, endSeconds: 100 * DAY },
      skipped: { startSeconds: 90 * DAY, endSeconds: 98 * DAY },
    });
    expect(effectiveMaxCatchup(2 * DAY, DAY, undefined)).toBe(2 * DAY);
  });

  it("a hunt's own max_catchup replaces the global one, higher or lower", () => {
    expect(effectiveMaxCatchup(60, DAY, 6 * HOUR)).toBe(6 * HOUR);
    expect(effectiveMaxCatchup(60, DAY, 7 * DAY)).toBe(7 * DAY);
    expect(effectiveMaxCatchup(60, DAY, undefined)).toBe(DAY);
  });
});

describe('max_catchup in a hunt file', () => {
  const good = 'schedule: {mode: rate, interval: 5m}\nqueries: [SELECT 1]\n';

  it.each([
    ['12h', 12 * HOUR],
    ['1d', DAY],
    ['2d12h', 2.5 * DAY],
    [7200, 2 * HOUR],
    ['"7200"', 2 * HOUR],
    ['5m', 300],
  ])('reads %j as %i seconds', (raw, seconds) => {
    const result = compileHuntFile('/h/x.yaml', `${good}max_catchup: ${raw}\n`, 0.8);
    expect(result).toMatchObject({ kind: 'hunt', spec: { maxCatchupSeconds: seconds } });
  });

  it('is unset by default (the global setting applies)', () => {
    expect(compileHuntFile('/h/x.yaml', good, 0.8)).toMatchObject({ kind: 'hunt', spec: { maxCatchupSeconds: undefined } });
  });

  it.each([
    ['0', /0 must be whole seconds or a duration/],
    ['-5', /-5 must be/],
    ['1.5', /1\.5 must be/],
    ['soon', /"soon" must be/],
    ['4m', /"4m" must be .* at least the interval \(300 s\)/],
    ['299', /299 must be .* at least the interval/],
    ['{days: 1}', /must be whole seconds/],
  ])('rejects %j naming the file, key and value', (raw, reason) => {
    const result = compileHuntFile('/h/x.yaml', `${good}max_catchup: ${raw}\n`, 0.8);
    expect(result).toMatchObject({ kind: 'invalid', file: '/h/x.yaml', key: 'max_catchup' });
    if (result.kind === 'invalid') expect(result.reason).toMatch(reason);
  });
});
