import { afterAll, describe, expect, it } from 'vitest';
import { explore } from './search.js';
import { allFiresDone, windowInvariants, windowProtocol, type WindowScope, type WindowState } from './window-protocol.js';

/**
 * The window invariant with no timing assumption (docs/claim-protocol.md#the-invariant):
 * every interleaving of two runners over three or four fires of one hunt, where any runner may be
 * paused for any number of steps, a lease may expire at any moment, and every read may be
 * stale by the time it is acted on. Today's Keeper protocol must show the double run of
 * issue 26 (a paused winner, a taker running a newer fire from the same watermark); the
 * window chain must hold, and from every state all fires can still be run.
 */
const SCOPE: WindowScope = { variant: 'chain', runners: 2, maxFire: 3, failures: 1, crashes: 1 };
const sizes: string[] = [];
afterAll(() => console.info(`window model, states explored per check:\n${sizes.join('\n')}`));

function check(name: string, scope: WindowScope) {
  const result = explore<WindowState>(windowProtocol(scope), { invariants: windowInvariants, goal: allFiresDone, mustReach: (s) => s.crashesUsed < scope.runners });
  const verdict = result.violation ? `counterexample (${result.violation.invariant})` : result.stuck ? `${result.stuck.count} stuck states` : 'holds';
  sizes.push(`  ${name}: ${result.states.toLocaleString('en')} states, ${result.transitions.toLocaleString('en')} transitions — ${verdict}`);
  return result;
}

describe('windows with no timing assumption', { timeout: 300_000 }, () => {
  it("today's protocol runs overlapping windows once a paused winner's lease expires", () => {
    const today = check('today, 2 runners, pauses and stale reads', { ...SCOPE, variant: 'today', failures: 0, crashes: 0 });
    expect(today.violation?.invariant).toMatch(/processed twice/);
    const trace = today.violation?.trace ?? [];
    expect(trace.some((l) => l.includes('expires'))).toBe(true);
    expect(trace.some((l) => l.includes('clean expired lease'))).toBe(true);
  });

  it('the window chain holds: windows identical or disjoint, the watermark monotone, no fire lost, and every fire can still run', () => {
    const result = check('chain, 2 runners, 1 failure, 1 crash, pauses and stale reads', SCOPE);
    expect(result.violation?.trace, result.violation?.invariant).toBeUndefined();
    expect(result.stuck?.trace, 'a reachable state from which the fires can no longer all run').toBeUndefined();
  });

  it('four fires and a crash: the same', () => {
    const result = check('chain, 2 runners, 4 fires, 1 crash', { ...SCOPE, maxFire: 4, failures: 0 });
    expect(result.violation?.trace, result.violation?.invariant).toBeUndefined();
    expect(result.stuck?.trace).toBeUndefined();
  });
});
