import { afterAll, describe, expect, it } from 'vitest';
import { keeperProtocol, type KeeperScope } from './keeper-protocol.js';
import { fireDone, invariants, type Observed } from './scope.js';
import { explore, type Exploration, type Invariant, type TransitionSystem } from './search.js';
import { tableProtocol, type TableScope } from './table-protocol.js';

/**
 * The exhaustive model of both claim modes (docs/claim-protocol.md): every interleaving
 * of 2–3 runners claiming one owed fire, with crashes after the claim, after the output
 * INSERT and after the watermark, searched state by state. Each check prints the size of
 * the space it covered. Where a mode rests on an assumption (quorum visibility, the
 * strict settle boundary, the tie rule, a run inside its lease), the model is also run
 * with the assumption broken and must find the double run.
 */
const ALL_CRASHES = ['after-claim', 'after-output', 'after-watermark'] as const;
const TABLE: TableScope = {
  runners: 2,
  lease: 7,
  poll: 2,
  runTime: 2,
  crashes: ALL_CRASHES,
  maxCrashes: 1,
  stall: false,
  replicaLag: 0,
  settle: 2,
  margin: 1,
  strict: true,
  maxAck: 3,
  planDelay: 5,
  tieRule: true,
};
const KEEPER: KeeperScope = {
  runners: 2,
  lease: 7,
  poll: 2,
  runTime: 2,
  crashes: ALL_CRASHES,
  maxCrashes: 1,
  stall: false,
  replicaLag: 0,
  ambiguous: 1,
  failures: 1,
  planDelay: 5,
  takeover: true,
};

const sizes: string[] = [];
afterAll(() => console.info(`claims model, states explored per check:\n${sizes.join('\n')}`));

/** Every state reachable, each visited once; records which kinds of step occurred (labels without ticks and ids). */
function search<S extends Observed>(name: string, system: TransitionSystem<S>, checks: ReadonlyArray<Invariant<Observed>> = invariants) {
  const kinds = new Set<string>();
  const recording: TransitionSystem<S> = {
    ...system,
    next: (s) => {
      const steps = system.next(s);
      for (const step of steps) kinds.add(step.label.replace(/^t\d+ (r\d+ )?/, '').replace(/\d+/g, 'N'));
      return steps;
    },
  };
  const result: Exploration<S> = explore<S>(recording, { invariants: checks, goal: fireDone, isTick: (label) => label.startsWith('time ') });
  const recovery = result.recoveryTicks === undefined ? '' : `, fire runnable within ${result.recoveryTicks} ticks from any state`;
  const verdict = result.violation ? `counterexample (${result.violation.invariant})` : result.stuck ? `${result.stuck.count} stuck states` : `holds${recovery}`;
  sizes.push(`  ${name}: ${result.states.toLocaleString('en')} states, ${result.transitions.toLocaleString('en')} transitions — ${verdict}`);
  return { ...result, kinds: [...kinds] };
}

/** Holds: no violation, and from every reachable state the fire can still be run (no state blocks it for good). */
function expectHolds(result: ReturnType<typeof search>) {
  expect(result.violation?.trace, result.violation?.invariant).toBeUndefined();
  expect(result.stuck?.trace, 'a reachable state from which the fire can never run').toBeUndefined();
}

const exactlyOnce: Invariant<Observed> = { name: 'the output is written at most once', holds: (s) => s.out <= 1 };
const has = (kinds: readonly string[], pattern: RegExp) => expect(kinds.some((k) => pattern.test(k)), String(pattern)).toBe(true);

describe('table protocol (settle, read-back, tie rule, leases)', { timeout: 180_000 }, () => {
  it('2 runners, a crash at any of the three points: one run at a time, and the fire can always still run', () => {
    const result = search('table, 2 runners, crashes after claim/output/watermark', tableProtocol(TABLE));
    expectHolds(result);
    // Whatever happened (a crash holding the lease, a late claim, a tie), the fire can run within
    // a lease and one claim's wait: the cost of those is delay, bounded.
    expect(result.recoveryTicks).toBeLessThanOrEqual(TABLE.lease + TABLE.settle + TABLE.margin);
    // The model reaches what the protocol has to handle, not only the happy path.
    for (const kind of [/\(tie\)/, /\(late\)/, /read-back: lost \(tie\)/, /already run/, /merge keeps/, /crash after-claim/, /crash after-output/, /crash after-watermark/, /live lease, lost/]) {
      has(result.kinds, kind);
    }
  });

  it('3 runners: the same', () => {
    expectHolds(search('table, 3 runners, a crash after the output', tableProtocol({ ...TABLE, runners: 3, crashes: ['after-output'], maxAck: 2, planDelay: 1 })));
  });

  it('exactly once unless a crash falls between the output INSERT and the watermark (then the dedup token holds one row)', () => {
    expectHolds(search('table, exactly once, crashes after claim/watermark', tableProtocol({ ...TABLE, crashes: ['after-claim', 'after-watermark'] }), [...invariants, exactlyOnce]));
    const rerun = search('table, exactly once, a crash after the output', tableProtocol({ ...TABLE, crashes: ['after-output'] }), [exactlyOnce]);
    expect(rerun.violation?.trace).toContain(rerun.violation?.trace.find((l) => l.endsWith('crash after-output')));
  });

  it('the strict settle boundary holds without the margin; accepting an ack at exactly settle gives two winners', () => {
    expectHolds(search('table, strict boundary, no margin', tableProtocol({ ...TABLE, margin: 0 })));
    expectHolds(search('table, ack at settle accepted, with the margin', tableProtocol({ ...TABLE, strict: false })));
    const loose = search('table, ack at settle accepted, no margin', tableProtocol({ ...TABLE, margin: 0, strict: false }));
    expect(loose.violation?.invariant).toMatch(/one run at a time/);
    expect(loose.violation?.trace.some((l) => l.endsWith(`ack after ${TABLE.settle}`))).toBe(true);
  });

  it('without quorum (a write visible after its acknowledgement) two runners win', () => {
    const lagging = search('table, replica lag 3 ticks (no quorum)', tableProtocol({ ...TABLE, replicaLag: 3 }));
    expect(lagging.violation?.invariant).toMatch(/one run at a time/);
  });

  it('without the tie rule a merge between two read-backs gives two winners', () => {
    const noTie = search('table, no tie rule', tableProtocol({ ...TABLE, tieRule: false }));
    expect(noTie.violation?.invariant).toMatch(/one run at a time/);
    expect(noTie.violation?.trace.some((l) => l.includes('merge keeps'))).toBe(true);
  });

  it('a run that outlives its lease runs twice', () => {
    const stalled = search('table, a run stalls past its lease', tableProtocol({ ...TABLE, stall: true }));
    expect(stalled.violation?.trace.some((l) => l.endsWith('stalls past its lease'))).toBe(true);
  });
});

describe('Keeper mode (strict inserts of the lease and the fire record, token-conditional cleanup)', { timeout: 180_000 }, () => {
  it('2 runners, crashes, an ambiguous insert and a failed run: one run at a time, and the fire can always still run', () => {
    const result = search('keeper, 2 runners, crashes, 1 ambiguous insert, 1 failed run', keeperProtocol(KEEPER));
    expectHolds(result);
    // No settle wait: at worst a crashed run's lease has to expire.
    expect(result.recoveryTicks).toBeLessThanOrEqual(KEEPER.lease);
    for (const kind of [
      /Node exists$/,
      /inspect: live lease, lost/,
      /clean expired lease$/,
      /clean record$/,
      /landed, connection dropped/,
      /not landed, connection dropped/,
      /read-back: our token, won/,
      /already run/,
      /run fails/,
      /inspect: record and watermark, the fire ran/,
    ]) {
      has(result.kinds, kind);
    }
  });

  it('3 runners: the same', () => {
    expectHolds(search('keeper, 3 runners, crashes, 1 ambiguous insert, 1 failed run', keeperProtocol({ ...KEEPER, runners: 3, planDelay: 1 })));
  });

  it('exactly once unless a crash falls between the output INSERT and the watermark', () => {
    expectHolds(search('keeper, exactly once, crashes after claim/watermark', keeperProtocol({ ...KEEPER, crashes: ['after-claim', 'after-watermark'] }), [...invariants, exactlyOnce]));
    const rerun = search('keeper, exactly once, a crash after the output', keeperProtocol({ ...KEEPER, crashes: ['after-output'] }), [exactlyOnce]);
    expect(rerun.violation?.trace.some((l) => l.endsWith('crash after-output'))).toBe(true);
  });

  it('liveness rests on the takeover: without the cleanup of an expired lease a crashed run blocks the fire for good', () => {
    const blocked = search('keeper, expired leases never cleaned', keeperProtocol({ ...KEEPER, takeover: false }));
    expect(blocked.violation).toBeUndefined();
    expect(blocked.stuck?.count).toBeGreaterThan(0);
    expect(blocked.stuck?.trace.some((l) => l.includes('crash'))).toBe(true);
  });

  it('needs no timing but the lease: a run that outlives it runs twice', () => {
    const stalled = search('keeper, a run stalls past its lease', keeperProtocol({ ...KEEPER, stall: true }));
    expect(stalled.violation?.trace.some((l) => l.endsWith('stalls past its lease'))).toBe(true);
  });

  it('rests on the watermark read seeing the last write: a lagging watermark reruns a finished fire', () => {
    const lagging = search('keeper, watermark visible 2 ticks late', keeperProtocol({ ...KEEPER, replicaLag: 2 }));
    expect(lagging.violation?.trace.some((l) => l.endsWith('record without watermark'))).toBe(true);
  });
});
