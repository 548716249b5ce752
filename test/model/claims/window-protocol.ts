import type { Invariant, Step, TransitionSystem } from './search.js';

/**
 * The windows of one hunt over several fires, with NO timing at all
 * (docs/claim-protocol.md#the-invariant): steps of the runners interleave arbitrarily
 * (any runner may be paused for any number of others' steps), a lease may expire at any
 * moment while its holder is paused (`lease expires`), and every read may be acted on
 * later (a stale read: a runner plans from the fire and watermark it read, then acts).
 * Keeper keys are linearizable (each step is one key operation or one statement).
 *
 * Two protocols:
 * - `today`: the lease key and a fire record; a won claim runs `[watermark read after the
 *   win, planned fire)`; the commit is an unconditional watermark write. The issue-26 double
 *   run: a paused winner's lease expires, a taker claims a newer fire and runs from the same
 *   watermark;
 * - `chain`: a start key per window start (`<hunt>@<watermark>`) holds the window's end, fixed
 *   by the first claim from that start; a later claim from the same start runs that window
 *   (a retake); the commit is fenced (never moves the watermark back) and skipped by a run
 *   that no longer holds the lease; a failed run keeps its start key.
 *
 * Fires are 1..maxFire; the watermark starts at 0 (fire 0 done).
 */
export type WindowVariant = 'today' | 'chain';

export interface WindowScope {
  readonly variant: WindowVariant;
  readonly runners: 2 | 3;
  readonly maxFire: number;
  /** Runs that fail after writing their first statement's output (partial output), at most. */
  readonly failures: number;
  /** Runners that stop for good (a crash; the lease expires on its own), at most. */
  readonly crashes: number;
}

type Pc =
  | 'idle'
  | 'insert'
  | 'inspect'
  | 'clean'
  | 'reinsert'
  | 'lease-only'
  | 'won'
  | 'run'
  | 'holds'
  | 'commit'
  | 'release'
  | 'crashed';

interface Runner {
  readonly pc: Pc;
  /** The token of the current attempt (per runner, increasing). */
  readonly tok: number;
  /** Planned fire, then the claimed window's end. */
  readonly end: number;
  /** The watermark read at planning, then the claimed window's start. */
  readonly start: number;
  /** inspect → clean: the lease token seen (owner*100+n), -1 none; whether a start key / record was seen. */
  readonly seen: number;
  readonly seenKey: boolean;
  readonly attempt: number;
}

interface Key {
  readonly owner: number;
  readonly tok: number;
}

/** What the window invariants read: shared by this model and the table chain's (table-chain-protocol.ts). */
export interface WindowObserved {
  /** The newest fire come due. */
  readonly latest: number;
  readonly wm: number;
  /** Distinct output windows written, `start-end` (a window written twice is one: the dedup token). */
  readonly out: readonly string[];
  readonly wmBack: boolean;
}

export interface WindowState extends WindowObserved {
  readonly latest: number;
  readonly wm: number;
  readonly lease: (Key & { readonly fire: number; readonly live: boolean }) | null;
  /** chain: start → end of its window; today: fire records (end = fire). */
  readonly keys: ReadonlyArray<readonly [number, number, Key]>;
  /** Distinct output windows written, `start-end` (a window written twice is one: the dedup token). */
  readonly out: readonly string[];
  readonly wmBack: boolean;
  readonly runners: readonly Runner[];
  readonly failuresUsed: number;
  readonly crashesUsed: number;
}

const fresh = (tok: number): Runner => ({ pc: 'idle', tok, end: 0, start: 0, seen: -1, seenKey: false, attempt: 0 });
const parse = (w: string): [number, number] => w.split('-').map(Number) as [number, number];

export const windowInvariants: ReadonlyArray<Invariant<WindowObserved>> = [
  {
    name: 'no window of the data is processed twice: output windows are identical or disjoint',
    holds: (s) =>
      s.out.every((a, i) =>
        s.out.every((b, j) => {
          if (i >= j) return true;
          const [a0, a1] = parse(a);
          const [b0, b1] = parse(b);
          return a1 <= b0 || b1 <= a0;
        }),
      ),
  },
  { name: 'the watermark never moves backwards', holds: (s) => !s.wmBack },
  {
    name: 'no owed fire is lost: every fire up to the watermark lies in a written window',
    holds: (s) => {
      for (let f = 1; f <= s.wm; f += 1) if (!s.out.some((w) => parse(w)[0] < f && f <= parse(w)[1])) return false;
      return true;
    },
  },
];

export const allFiresDone = (s: WindowObserved): boolean => s.wm === s.latest && s.latest > 0 && s.wm >= s.latest;

export function windowProtocol(scope: WindowScope): TransitionSystem<WindowState> {
  const chain = scope.variant === 'chain';
  const initial: WindowState = {
    latest: 1,
    wm: 0,
    lease: null,
    keys: [],
    out: [],
    wmBack: false,
    runners: Array.from({ length: scope.runners }, () => fresh(0)),
    failuresUsed: 0,
    crashesUsed: 0,
  };
  const setRunner = (s: WindowState, i: number, r: Runner, patch: Partial<WindowState> = {}): WindowState => ({
    ...s,
    ...patch,
    runners: s.runners.map((x, j) => (j === i ? r : x)),
  });
  const keyAt = (s: WindowState, k: number) => s.keys.find(([at]) => at === k);
  const withKey = (s: WindowState, k: number, end: number, key: Key) => [...s.keys.filter(([at]) => at !== k), [k, end, key] as const].sort((x, y) => x[0] - y[0]);
  const withoutKey = (s: WindowState, k: number) => s.keys.filter(([at]) => at !== k);
  const mine = (x: Key | null | undefined, i: number, r: Runner) => x !== null && x !== undefined && x.owner === i && x.tok === r.tok;
  /** The key a claim creates beside the lease: the window's start key (chain) or the fire's record (today). */
  const claimKey = (r: Runner) => (chain ? r.start : r.end);

  function steps(s: WindowState, i: number): Step<WindowState>[] {
    const r = s.runners[i] as Runner;
    const out: Step<WindowState>[] = [];
    const go = (label: string, state: WindowState) => out.push({ label: `r${i} ${label}`, state });
    const idle = (label: string, patch: Partial<WindowState> = {}) => go(label, setRunner(s, i, { ...fresh(r.tok) }, patch));
    const insertBoth = (label: string, next: Pc) => {
      const k = claimKey(r);
      if (s.lease === null && keyAt(s, k) === undefined) {
        const key = { owner: i, tok: r.tok };
        go(`${label}: won`, setRunner(s, i, { ...r, pc: 'won' }, { lease: { ...key, fire: r.end, live: true }, keys: withKey(s, k, r.end, key) }));
      } else if (next === 'inspect') go(`${label}: Node exists`, setRunner(s, i, { ...r, pc: 'inspect' }));
      else idle(`${label}: Node exists, lost`);
    };
    if (r.pc !== 'idle' && r.pc !== 'crashed' && s.crashesUsed < scope.crashes) {
      go('crashes', setRunner(s, i, { ...r, pc: 'crashed' }, { crashesUsed: s.crashesUsed + 1 }));
    }
    switch (r.pc) {
      case 'idle':
        // Plans from what it reads now; acts on it later (the read may be stale by then).
        if (s.wm < s.latest) go(`plans fire ${s.latest} from watermark ${s.wm}`, setRunner(s, i, { ...fresh(r.tok + 1), pc: 'insert', end: s.latest, start: s.wm }));
        break;
      case 'insert':
        if (chain && r.start >= r.end) idle('stale plan, nothing owed');
        else insertBoth('insert lease + key', 'inspect');
        break;
      case 'inspect': {
        const k = keyAt(s, claimKey(r));
        if (s.lease?.live) idle('inspect: live lease, lost');
        else if (s.lease) go('inspect: expired lease', setRunner(s, i, { ...r, pc: 'clean', seen: s.lease.owner * 100 + s.lease.tok, seenKey: k !== undefined }));
        else if (chain) go('inspect: no lease', setRunner(s, i, { ...r, pc: k ? 'lease-only' : 'reinsert', seenKey: k !== undefined }));
        else if (k && s.wm >= r.end) idle('inspect: record and watermark, lost');
        else if (k) go('inspect: record without watermark, deleted', setRunner(s, i, { ...r, pc: 'reinsert' }, { keys: withoutKey(s, r.end) }));
        else go('inspect: keys gone', setRunner(s, i, { ...r, pc: 'reinsert' }));
        break;
      }
      case 'clean': {
        // DELETE the lease WHERE token = seen AND expired (today: and the record of its fire).
        const same = s.lease !== null && !s.lease.live && s.lease.owner * 100 + s.lease.tok === r.seen;
        const keys = !chain && same && s.lease ? s.keys.filter(([, , key]) => !(key.owner === s.lease?.owner && key.tok === s.lease?.tok)) : s.keys;
        const next: Pc = chain && r.seenKey ? 'lease-only' : 'reinsert';
        go(`clean expired lease${same ? '' : ' (no longer matches)'}`, setRunner(s, i, { ...r, pc: next }, { lease: same ? null : s.lease, keys }));
        break;
      }
      case 'reinsert':
        insertBoth('insert once more', 'idle');
        break;
      case 'lease-only': {
        // chain: the window from this start was claimed before: take the lease, run that window.
        const k = keyAt(s, r.start);
        if (s.lease === null && k) {
          go('retake: lease inserted', setRunner(s, i, { ...r, pc: 'won', end: k[1] }, { lease: { owner: i, tok: r.tok, fire: k[1], live: true } }));
        } else idle('retake: lost');
        break;
      }
      case 'won': {
        // Read the watermark after the win: the window's start (today) or the stale-claim check (chain).
        if (s.wm >= r.end || (chain && s.wm > r.start)) go('won, already run: release', setRunner(s, i, { ...r, pc: 'release', seenKey: true }));
        else go(`runs window ${chain ? r.start : s.wm}-${r.end}`, setRunner(s, i, { ...r, pc: 'run', start: chain ? r.start : s.wm }));
        break;
      }
      case 'run': {
        const w = `${r.start}-${r.end}`;
        const written = s.out.includes(w) ? s.out : [...s.out, w].sort();
        go('output written', setRunner(s, i, { ...r, pc: chain ? 'holds' : 'commit' }, { out: written }));
        if (s.failuresUsed < scope.failures) {
          // Its first statement's output is in, a later one fails: released as a failure.
          const lease = mine(s.lease, i, r) ? null : s.lease;
          const keys = chain ? s.keys : s.keys.filter(([at, , key]) => !(at === r.end && key.owner === i && key.tok === r.tok));
          idle('output written, then the run fails: released', { out: written, lease, keys, failuresUsed: s.failuresUsed + 1 });
        }
        break;
      }
      case 'holds':
        if (mine(s.lease, i, r)) go('still holds the lease', setRunner(s, i, { ...r, pc: 'commit' }));
        else idle('lease taken over: stops before the commit');
        break;
      case 'commit': {
        const wm = chain ? Math.max(s.wm, r.end) : r.end;
        go(`watermark := ${r.end}${chain ? ' (fenced)' : ''}`, setRunner(s, i, { ...r, pc: 'release', seenKey: true }, { wm, wmBack: s.wmBack || wm < s.wm }));
        break;
      }
      case 'release': {
        const lease = mine(s.lease, i, r) ? null : s.lease;
        const keys = chain ? withoutKey(s, r.start) : s.keys;
        idle('release', { lease, keys });
        break;
      }
      default:
        break;
    }
    return out;
  }

  /** Tokens matter only by identity: renumber each runner's by rank among those still referenced. */
  function key(s: WindowState): string {
    const refs = s.runners.map((r, i) => {
      const used = new Set<number>([r.tok]);
      if (s.lease?.owner === i) used.add(s.lease.tok);
      for (const [, , k] of s.keys) if (k.owner === i) used.add(k.tok);
      for (const x of s.runners) if (x.seen >= 0 && Math.floor(x.seen / 100) === i) used.add(x.seen % 100);
      return [...used].sort((a, b) => a - b);
    });
    const name = (owner: number, tok: number) => refs[owner]?.indexOf(tok) ?? -1;
    const seen = (v: number) => (v < 0 ? -1 : Math.floor(v / 100) * 100 + name(Math.floor(v / 100), v % 100));
    return JSON.stringify([
      s.latest,
      s.wm,
      s.lease && [s.lease.owner, name(s.lease.owner, s.lease.tok), s.lease.fire, s.lease.live],
      s.keys.map(([at, end, k]) => [at, end, k.owner, name(k.owner, k.tok)]),
      s.out,
      s.wmBack,
      s.runners.map((r, i) => [r.pc, name(i, r.tok), r.end, r.start, seen(r.seen), r.seenKey]),
      s.failuresUsed,
      s.crashesUsed,
    ]);
  }

  return {
    initial,
    key,
    next(s) {
      const all = s.runners.flatMap((_, i) => steps(s, i));
      if (s.latest < scope.maxFire) all.push({ label: `fire ${s.latest + 1} comes due`, state: { ...s, latest: s.latest + 1 } });
      if (s.lease?.live) all.push({ label: `lease of r${s.lease.owner} expires (its holder paused past it)`, state: { ...s, lease: { ...s.lease, live: false } } });
      return all;
    },
  };
}
