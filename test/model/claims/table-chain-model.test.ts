import { afterAll, describe, expect, it } from 'vitest';
import { explore } from './search.js';
import { tableChainProtocol, type TableChainScope, type TableChainState } from './table-chain-protocol.js';
import { allFiresDone, windowInvariants } from './window-protocol.js';

/**
 * The table protocol's window chain with no timing assumption
 * (docs/claim-protocol.md#the-window-chain-in-the-table-protocol): every interleaving of two
 * runners over three fires of one hunt, with pauses past the lease, a failed run, a crash, late
 * claims and stale writes. Only the newest hunt_lease row means anything, so a write that lands
 * on top after its writer lost the hunt rewrites the chain: with an unconditional confirm,
 * renewal or release the search finds two windows from one start; with the conditional ones it
 * holds, and every fire can still run. A late claim's delete after a merge loses the chain too.
 */
const CONDITIONAL = { confirm: true, renew: true, release: true };
/**
 * The protocol now: conditional writes, a late claim released (never deleted), merges at any
 * moment. With nothing ever deleted, a row under the newest can never be the newest again, so the
 * model keeps only rows that can (a merge then changes nothing it could see); merges matter only
 * where a late claim deletes its row (the last check).
 */
const SCOPE: TableChainScope = { runners: 2, maxFire: 3, failures: 1, crashes: 1, conditional: CONDITIONAL, late: 'release', merges: true };
const sizes: string[] = [];
afterAll(() => console.info(`table chain model, states explored per check:\n${sizes.join('\n')}`));

function check(name: string, scope: TableChainScope) {
  const system = tableChainProtocol(scope);
  const kinds = new Set<string>();
  const recording: typeof system = {
    ...system,
    next: (s) => {
      const steps = system.next(s);
      for (const step of steps) kinds.add(step.label.replace(/^r\d /, ''));
      return steps;
    },
  };
  const result = explore<TableChainState>(recording, { invariants: windowInvariants, goal: allFiresDone, mustReach: (s) => s.crashesUsed < scope.runners });
  const verdict = result.violation ? `counterexample (${result.violation.invariant})` : result.stuck ? `${result.stuck.count} stuck states` : 'holds';
  sizes.push(`  ${name}: ${result.states.toLocaleString('en')} states, ${result.transitions.toLocaleString('en')} transitions — ${verdict}`);
  return { ...result, kinds: [...kinds] };
}

function expectDouble(result: ReturnType<typeof check>, stale: RegExp) {
  expect(result.violation?.invariant).toMatch(/processed twice/);
  const trace = result.violation?.trace ?? [];
  expect(trace.some((l) => l.includes('expires')), 'a holder paused past its lease').toBe(true);
  expect(trace.some((l) => stale.test(l)), String(stale)).toBe(true);
}

const holds = (result: ReturnType<typeof check>) => {
  expect(result.violation?.trace, result.violation?.invariant).toBeUndefined();
  expect(result.stuck?.trace, 'a reachable state from which the fires can no longer all run').toBeUndefined();
};

describe('the table chain with no timing assumption', { timeout: 300_000 }, () => {
  it('unconditional writes: a stale row lands on top, the hunt looks free while a run goes on, and two windows start from one watermark', () => {
    const old = check('unconditional confirm, renewal (check, then put) and release', { ...SCOPE, conditional: { confirm: false, renew: false, release: false }, late: 'none' });
    expectDouble(old, /release row written — over r\d's row \(fire \d, live\)/);
    console.info(`table chain, unconditional writes, shortest counterexample:\n  ${old.violation?.trace.join('\n  ')}`);
  });

  it('each unconditional write alone is enough for the double', () => {
    expectDouble(check('only the release unconditional', { ...SCOPE, conditional: { ...CONDITIONAL, release: false }, late: 'none' }), /release row written — over/);
    expectDouble(check('only the renewal unconditional (check, then put)', { ...SCOPE, conditional: { ...CONDITIONAL, renew: false }, late: 'none' }), /renewal row lands — over/);
    expectDouble(check('only the confirm unconditional', { ...SCOPE, conditional: { ...CONDITIONAL, confirm: false }, late: 'none' }), /confirm row written — over/);
  });

  it('conditional writes hold: windows identical or disjoint, the watermark monotone, no fire lost, and every fire can still run', () => {
    const result = check('the protocol now: conditional writes, 1 failed run, 1 crash, late claims released, merges', SCOPE);
    holds(result);
    // The model reaches what the writes have to handle, not only the happy path.
    for (const kind of [
      /chain: retake/,
      /then the run fails/,
      /renewal \(conditional\): row written/,
      /renewal: the hunt was taken over/,
      /holds check: taken over/,
      /confirm \(conditional\): nothing written/,
      /confirm read-back: lost/,
      /release \(conditional\): nothing written/,
      /already run/,
      /late: releases its claim/,
      /crashes/,
      /expires/,
    ]) {
      expect(result.kinds.some((k) => kind.test(k)), String(kind)).toBe(true);
    }
  });

  it("a late claim's delete after a merge leaves no row: the chain is lost and a wider window starts from the same watermark", () => {
    const merged = check('conditional writes, late claims deleting their rows (before the fix), merges', { ...SCOPE, late: 'delete' });
    expectDouble(merged, /no row left/);
    expect(merged.violation?.trace.some((l) => l.includes('merge drops'))).toBe(true);
    // Without merges the delete happens to hold: the row beneath it is still there.
    holds(check('conditional writes, late claims deleting their rows, no merges', { ...SCOPE, late: 'delete', merges: false }));
  });
});
