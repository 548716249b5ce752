import { CRASH_AT, type CommonScope, type Observed, type RunPhase } from './scope.js';
import type { Step, TransitionSystem } from './search.js';

/**
 * The Keeper claim mode (issue 19; docs/claim-protocol.md#keeper-mode) as a transition
 * system. Two KeeperMap keys per claim, written by one strict-mode multi insert (both
 * or neither): the hunt lease `h` {owner, token, lease_until} and the fire record `h@f`
 * {token}. Keeper is linearizable, so a key operation takes effect at its step, in
 * interleaving order. A claim whose insert meets an existing key reads the keys and
 * the watermark: a live lease loses; an expired lease, or a record without a watermark,
 * is deleted on its token (conditional) and the insert tried once more. An ambiguous
 * insert (the connection dropped after sending, landed or not) is settled by reading
 * `h` back. After a win the watermark is rechecked. Success: watermark, then delete
 * `h` on our token (the record stays); failure: delete both on our token.
 *
 * The watermark is a MergeTree row: visible to every later read on one server or with
 * quorum; with `replicaLag` it becomes visible only `lag` ticks after the write.
 */
export interface KeeperScope extends CommonScope {
  /** At most this many inserts end ambiguously (the connection drops after sending). */
  readonly ambiguous: number;
  /** At most this many runs fail (statements error): the fire stays owed. */
  readonly failures: number;
  /** Ticks a planned claim may wait between the tick's due query and its insert. */
  readonly planDelay: number;
  /** false: an expired lease is never cleaned up (to show that liveness rests on the takeover). */
  readonly takeover: boolean;
}

type Pc = 'idle' | 'planned' | 'ambiguous' | 'inspect' | 'clean-lease' | 'clean-record' | 'retry' | 'won' | RunPhase | 'done' | 'crashed';

interface Runner {
  readonly pc: Pc;
  /** The token of this runner's current claim attempt (attempts are numbered per runner). */
  readonly token: number;
  /** idle: earliest poll; a run: the tick it was won; cleaning: the token read. */
  readonly a: number;
  /** idle: poll deadline. */
  readonly b: number;
  readonly stalledUntil: number;
}

interface Token {
  readonly owner: number;
  readonly n: number;
}

export interface KeeperState extends Observed {
  readonly lease: (Token & { readonly until: number }) | null;
  readonly record: Token | null;
  readonly runners: readonly Runner[];
  readonly crashesUsed: number;
  readonly stalls: number;
  readonly ambiguousUsed: number;
  readonly failuresUsed: number;
  /** The watermark write happened (visible to later reads unless lagging; Observed.wm is its tick). */
  readonly wmAt: number;
}

const same = (x: Token | null, owner: number, n: number) => x !== null && x.owner === owner && x.n === n;

export function keeperProtocol(scope: KeeperScope): TransitionSystem<KeeperState> {
  const { lease, poll } = scope;
  const idle = (t: number, token: number): Runner => ({ pc: 'idle', token, a: t + 1, b: t + poll, stalledUntil: 0 });
  const initial: KeeperState = {
    t: 0,
    lease: null,
    record: null,
    runners: Array.from({ length: scope.runners }, () => idle(-1, 0)),
    out: 0,
    dupOk: 0,
    wm: -1,
    wmAt: -1,
    crashesUsed: 0,
    stalls: 0,
    ambiguousUsed: 0,
    failuresUsed: 0,
    phases: Array.from({ length: scope.runners }, () => 'idle'),
  };
  const with_ = (s: KeeperState, i: number, r: Runner, patch: Partial<KeeperState> = {}): KeeperState => {
    const runners = s.runners.map((x, j) => (j === i ? r : x));
    return { ...s, ...patch, runners, phases: runners.map((x) => x.pc) };
  };
  /** Without lag the watermark is seen by every step after its write; with lag, from `wm` on. */
  const wmSeen = (s: KeeperState) => s.wmAt >= 0 && (scope.replicaLag === 0 || s.wm < s.t);
  const stalled = (s: KeeperState, r: Runner) => r.stalledUntil > s.t;
  const urgent = (s: KeeperState, r: Runner): boolean => {
    if (r.pc === 'idle') return s.t >= r.b;
    if (r.pc === 'planned') return s.t >= r.a + scope.planDelay;
    if (r.pc === 'running' || r.pc === 'output') return !stalled(s, r) && s.t >= r.a + scope.runTime;
    if (r.pc === 'done' || r.pc === 'crashed') return false;
    return !stalled(s, r);
  };

  function runnerSteps(s: KeeperState, i: number): Step<KeeperState>[] {
    const r = s.runners[i] as Runner;
    const { t } = s;
    const steps: Step<KeeperState>[] = [];
    const after = (label: string, state: KeeperState) => steps.push({ label: `t${t} r${i} ${label}`, state });
    const lost = (label: string) => after(label, with_(s, i, idle(t, r.token)));
    /** The strict multi insert of both keys, and what the runner learns of it. */
    const insert = (label: string, token: number) => {
      const free = s.lease === null && s.record === null;
      const keys = { lease: { owner: i, n: token, until: t + lease }, record: { owner: i, n: token } };
      if (free) after(`${label}: ok, won`, with_(s, i, { ...r, pc: 'won', token, a: t }, keys));
      if (s.ambiguousUsed < scope.ambiguous) {
        const ambiguous: Runner = { ...r, pc: 'ambiguous', token };
        const used = { ambiguousUsed: s.ambiguousUsed + 1 };
        if (free) after(`${label}: landed, connection dropped`, with_(s, i, ambiguous, { ...keys, ...used }));
        after(`${label}: not landed, connection dropped`, with_(s, i, ambiguous, used));
      }
      if (!free) {
        if (label === 'insert') after(`${label}: Node exists`, with_(s, i, { ...r, pc: 'inspect', token }));
        else lost(`${label}: Node exists, lost`);
      }
    };
    /** DELETE both keys on our token; an unlucky delete (dropped connection) may remove only the lease. */
    const releaseBoth = (label: string, next: Runner, patch: Partial<KeeperState> = {}) => {
      const lease = same(s.lease, i, r.token) ? null : s.lease;
      after(`${label}: delete both keys on our token`, with_(s, i, next, { ...patch, lease, record: same(s.record, i, r.token) ? null : s.record }));
      if (s.ambiguousUsed < scope.ambiguous && same(s.record, i, r.token)) {
        after(`${label}: delete removed the lease only`, with_(s, i, next, { ...patch, lease, ambiguousUsed: s.ambiguousUsed + 1 }));
      }
    };
    switch (r.pc) {
      case 'idle':
        if (t < r.a) break;
        if (wmSeen(s)) after('due query: watermark covers the fire', with_(s, i, { ...r, pc: 'done' }));
        else after('due query: due', with_(s, i, { ...r, pc: 'planned', a: t }));
        break;
      case 'planned':
        insert('insert', r.token + 1);
        break;
      case 'ambiguous':
        if (same(s.lease, i, r.token)) after('read-back: our token, won', with_(s, i, { ...r, pc: 'won', a: t }));
        else lost('read-back: not our token, lost');
        break;
      case 'inspect':
        if (s.lease && s.lease.until > t) lost('inspect: live lease, lost');
        else if (s.lease && !scope.takeover) lost('inspect: expired lease, left alone');
        else if (s.lease) after('inspect: expired lease', with_(s, i, { ...r, pc: 'clean-lease', a: s.lease.owner * 1000 + s.lease.n }));
        else if (s.record && wmSeen(s)) lost('inspect: record and watermark, the fire ran');
        else if (s.record) after('inspect: record without watermark', with_(s, i, { ...r, pc: 'clean-record', a: s.record.owner * 1000 + s.record.n }));
        else lost('inspect: keys gone meanwhile, lost');
        break;
      case 'clean-lease': {
        // DELETE h, h@f WHERE token = <read> AND lease_until <= now: per key, on its own token.
        const tok = (x: Token | null) => x !== null && x.owner * 1000 + x.n === r.a;
        const leaseGone = tok(s.lease) && (s.lease?.until ?? 0) <= t;
        const patch = { lease: leaseGone ? null : s.lease, record: tok(s.record) ? null : s.record };
        after(`clean expired lease${leaseGone ? '' : ' (no longer matches)'}`, with_(s, i, { ...r, pc: 'retry' }, patch));
        break;
      }
      case 'clean-record': {
        const gone = s.record !== null && s.record.owner * 1000 + s.record.n === r.a;
        after(`clean record${gone ? '' : ' (no longer matches)'}`, with_(s, i, { ...r, pc: 'retry' }, { record: gone ? null : s.record }));
        break;
      }
      case 'retry':
        insert('insert once more', r.token);
        break;
      case 'won': {
        if (stalled(s, r)) break;
        if (wmSeen(s)) releaseBoth('won, already run', idle(t, r.token));
        else after('won: run', with_(s, i, { ...r, pc: 'running', a: t }));
        break;
      }
      case 'running':
      case 'output':
      case 'marked': {
        if (stalled(s, r)) break;
        const crash = CRASH_AT[r.pc];
        if (scope.crashes.includes(crash) && s.crashesUsed < scope.maxCrashes) {
          const dupOk = s.dupOk + (crash === 'after-output' ? 1 : 0);
          after(`crash ${crash}`, with_(s, i, { ...r, pc: 'crashed' }, { crashesUsed: s.crashesUsed + 1, dupOk }));
        }
        if (scope.stall && s.stalls === 0) after('stalls past its lease', with_(s, i, { ...r, stalledUntil: t + lease + 1 }, { stalls: 1 }));
        if (r.pc === 'running') {
          after('output INSERT', with_(s, i, { ...r, pc: 'output' }, { out: s.out + 1 }));
          if (s.failuresUsed < scope.failures) releaseBoth('run fails', idle(t, r.token), { failuresUsed: s.failuresUsed + 1 });
        }
        if (r.pc === 'output') {
          const wm = s.wm >= 0 ? s.wm : t + scope.replicaLag;
          after('watermark', with_(s, i, { ...r, pc: 'marked' }, { wm, wmAt: s.wmAt >= 0 ? s.wmAt : t }));
        }
        if (r.pc === 'marked') {
          const lease = same(s.lease, i, r.token) ? null : s.lease;
          after('success: delete the lease on our token (the record stays)', with_(s, i, { ...r, pc: 'done' }, { lease }));
        }
        break;
      }
      default:
        break;
    }
    return steps;
  }

  /** Tokens matter only by identity: each runner's are renumbered in order (its newest stays the greatest). */
  function tokenNames(s: KeeperState): (owner: number, n: number) => number {
    const used = s.runners.map((r, i) => {
      const mine = [r.token];
      if (s.lease?.owner === i) mine.push(s.lease.n);
      if (s.record?.owner === i) mine.push(s.record.n);
      for (const x of s.runners) if ((x.pc === 'clean-lease' || x.pc === 'clean-record') && Math.floor(x.a / 1000) === i) mine.push(x.a % 1000);
      return [...new Set(mine)].sort((x, y) => x - y);
    });
    return (owner, n) => used[owner]?.indexOf(n) ?? -1;
  }

  return {
    initial,
    key: (s) => {
      const name = tokenNames(s);
      const cleaning = (r: Runner) => (r.pc === 'clean-lease' || r.pc === 'clean-record' ? Math.floor(r.a / 1000) * 1000 + name(Math.floor(r.a / 1000), r.a % 1000) : r.a);
      // Time-shift invariant: ticks relative to now, so the space is finite with no horizon.
      const at = (r: Runner) => {
        if (r.pc === 'idle') return Math.max(r.a - s.t, 0);
        if (r.pc === 'planned') return Math.max(r.a - s.t, -scope.planDelay);
        if (r.pc === 'running' || r.pc === 'output') return Math.max(r.a - s.t, -scope.runTime);
        return r.pc === 'clean-lease' || r.pc === 'clean-record' ? cleaning(r) : 0;
      };
      return JSON.stringify([
        s.lease && [s.lease.owner, name(s.lease.owner, s.lease.n), s.lease.until > s.t ? s.lease.until - s.t : 'x'],
        s.record && [s.record.owner, name(s.record.owner, s.record.n)],
        s.runners.map((r, i) => [r.pc, name(i, r.token), at(r), r.pc === 'idle' ? r.b - s.t : 0, Math.max(r.stalledUntil - s.t, 0)]),
        s.out,
        s.dupOk,
        s.wmAt >= 0 ? (wmSeen(s) ? 'v' : s.wm - s.t) : 'none',
        s.crashesUsed,
        s.stalls,
        s.ambiguousUsed,
        s.failuresUsed,
      ]);
    },
    next(s) {
      const steps = s.runners.flatMap((_, i) => runnerSteps(s, i));
      if (!s.runners.some((r) => urgent(s, r))) steps.push({ label: `time ${s.t + 1}`, state: { ...s, t: s.t + 1 } });
      return steps;
    },
  };
}
