import type { Step, TransitionSystem } from './search.js';
import type { WindowObserved } from './window-protocol.js';

/**
 * The table protocol's window chain (docs/claim-protocol.md#the-window-chain-in-the-table-protocol)
 * over several fires of one hunt, with NO timing: the runners' steps interleave arbitrarily (any
 * runner may be paused for any number of others' steps), a lease may expire at any moment
 * (`expires`: its holder is paused past it), and every read may be acted on later.
 *
 * `hunt_lease` is a ReplacingMergeTree ordered by hunt_id with version `claimed`: the rows are a
 * stack, each write goes on top (a strictly newer `claimed`), and only the newest row means
 * anything. A merge may drop any row but the newest. The settle rule is abstracted away: a
 * claim's INSERT … SELECT is evaluated and visible in one atomic step (one server), so no tie
 * arises; what is left is what happens around the claim.
 *
 * A runner, as src/coordination/claims/table-claims.ts and src/runner/fire.ts do it:
 *   plan the latest due fire → free read (newest row live: lost; else remember it) →
 *   conditional insert (nothing if the newest row is live; its fire is the chain's: the newest
 *   row's fire if past the watermark, else the planned one) → [late: delete own rows newer than
 *   the free read's newest, stop] → read-back with the watermark (newest row ours and newer than
 *   the free read: won that fire, window [watermark, fire)) → confirm (a fresh row) → read-back
 *   (newest is (me, fire): run, else lost) → already run (watermark ≥ fire): release; else
 *   output → (fails: release) | holds check → fenced commit → release.
 * A renewal goes beside the run until its release (the release waits for a renewal in flight);
 * one that finds the newest row not (me, fire) stops, and the run does not commit.
 *
 * The three writes over an existing claim — confirm, renew, release — are either:
 * - unconditional (`false`, the code before the fix): the confirm a plain insert, the renewal a
 *   holds check and then a plain insert (two steps), the release a plain insert after a failed or
 *   already-run run whatever holds the hunt;
 * - conditional (`true`): one atomic step that writes only if the newest row is (me, fire).
 *
 * Fires are 1..maxFire; the watermark starts at 0 (fire 0 done).
 */
export interface TableChainScope {
  readonly runners: 2 | 3;
  readonly maxFire: number;
  /** Runs that fail after writing their output (partial output), at most. */
  readonly failures: number;
  /** Runners that stop for good (their rows stay, their leases expire), at most. */
  readonly crashes: number;
  readonly conditional: { readonly confirm: boolean; readonly renew: boolean; readonly release: boolean };
  /**
   * A claim may be late (acknowledged settle or more after its free read), and then:
   * `delete` (the code): it deletes its own rows newer than the free read's newest;
   * `release`: it writes a conditional release instead (only if the newest row is its own claim's).
   * `none`: no claim is late.
   */
  readonly late: 'none' | 'delete' | 'release';
  /** A merge may drop any row but the newest (matters only under a late claim's delete). */
  readonly merges: boolean;
}

type Pc = 'idle' | 'free' | 'insert' | 'late' | 'readback' | 'confirm' | 'confirm-check' | 'run' | 'holds' | 'commit' | 'release' | 'finish' | 'crashed';

/** `pending`: (unconditional renewal) the holds check passed, the row is not written yet. */
type Renewal = 'none' | 'pending' | 'lost';

interface Runner {
  readonly pc: Pc;
  /** Planned fire, then the claimed fire (the window's end). */
  readonly end: number;
  /** The window's start: the watermark read with the claim's read-back. */
  readonly start: number;
  /** The `claimed` rank of the newest row the free read saw (0: none). */
  readonly seen: number;
  readonly renew: Renewal;
}

interface Row {
  readonly owner: number;
  readonly fire: number;
  /** lease_until > now; a release row is never live. */
  readonly live: boolean;
  /** `claimed`, as a rank: a newer row has a larger one. */
  readonly seq: number;
}

export interface TableChainState extends WindowObserved {
  /** Oldest first: the newest row is the last. */
  readonly rows: readonly Row[];
  readonly runners: readonly Runner[];
  readonly failuresUsed: number;
  readonly crashesUsed: number;
}

const fresh: Runner = { pc: 'idle', end: 0, start: 0, seen: 0, renew: 'none' };
const newest = (s: TableChainState): Row | undefined => s.rows[s.rows.length - 1];
/** Runners whose `seen` still matters: the read-back compares with it, a late claim deletes above it. */
const seeing = (r: Runner) => r.pc === 'insert' || r.pc === 'late' || r.pc === 'readback';

/**
 * A canonical form, so the space is finite however many rows are written: a row that can never
 * again be the newest is dropped (a later row survives every delete still pending that it does),
 * and `claimed` is renumbered by rank.
 */
function normalize(s: TableChainState, lateDeletes: boolean): TableChainState {
  const deleters = s.runners.flatMap((r, i) => (r.pc === 'late' && lateDeletes ? [{ owner: i, seen: r.seen }] : []));
  const deletes = (d: { owner: number; seen: number }, row: Row) => row.owner === d.owner && row.seq > d.seen;
  const rows = s.rows.filter((row, k) => !s.rows.slice(k + 1).some((above) => deleters.every((d) => !deletes(d, above) || deletes(d, row))));
  const ranks = [...new Set([...rows.map((r) => r.seq), ...s.runners.filter(seeing).map((r) => r.seen)])].filter((v) => v > 0).sort((a, b) => a - b);
  const rank = (v: number) => (v === 0 ? 0 : ranks.indexOf(v) + 1);
  return {
    ...s,
    rows: rows.map((r) => ({ ...r, seq: rank(r.seq) })),
    runners: s.runners.map((r) => (seeing(r) ? { ...r, seen: rank(r.seen) } : { ...r, seen: 0 })),
  };
}

export function tableChainProtocol(scope: TableChainScope): TransitionSystem<TableChainState> {
  const { conditional } = scope;
  const norm = (s: TableChainState) => normalize(s, scope.late === 'delete');
  const initial: TableChainState = {
    latest: 1,
    wm: 0,
    rows: [],
    out: [],
    wmBack: false,
    runners: Array.from({ length: scope.runners }, () => fresh),
    failuresUsed: 0,
    crashesUsed: 0,
  };

  function steps(s: TableChainState, i: number): Step<TableChainState>[] {
    const r = s.runners[i] as Runner;
    const out: Step<TableChainState>[] = [];
    const top = newest(s);
    const mine = top !== undefined && top.owner === i && top.fire === r.end;
    const over = top && !mine ? ` — over r${top.owner}'s row (fire ${top.fire}${top.live ? ', live' : ''})` : '';
    const push = (row: Omit<Row, 'seq'>): Row[] => [...s.rows, { ...row, seq: (top?.seq ?? 0) + 1 + s.runners.reduce((m, x) => Math.max(m, x.seen), 0) }];
    const go = (label: string, runner: Runner, patch: Partial<TableChainState> = {}) =>
      out.push({ label: `r${i} ${label}`, state: norm({ ...s, ...patch, runners: s.runners.map((x, j) => (j === i ? runner : x)) }) });
    const idle = (label: string, patch: Partial<TableChainState> = {}) => go(label, fresh, patch);
    const renewing = r.pc === 'run' || r.pc === 'holds' || r.pc === 'commit';

    if (r.pc !== 'idle' && r.pc !== 'crashed' && s.crashesUsed < scope.crashes) go('crashes', { ...r, pc: 'crashed' }, { crashesUsed: s.crashesUsed + 1 });
    // The renewal, beside the run until renewal.stop().
    if (renewing && r.renew === 'none') {
      if (!mine) go('renewal: the hunt was taken over, stops renewing (no commit)', { ...r, renew: 'lost' });
      else if (conditional.renew) go('renewal (conditional): row written', r, { rows: push({ owner: i, fire: r.end, live: true }) });
      else go('renewal: holds, sends its row', { ...r, renew: 'pending' });
    }
    if (r.renew === 'pending') go(`renewal row lands${over}`, { ...r, renew: 'none' }, { rows: push({ owner: i, fire: r.end, live: true }) });

    switch (r.pc) {
      case 'idle':
        // Plans from the due query it reads now; acts on it later (by then the read may be stale).
        if (s.wm < s.latest) go(`plans fire ${s.latest}`, { ...fresh, pc: 'free', end: s.latest });
        break;
      case 'free':
        if (top?.live) idle('free read: live lease, lost');
        else go('free read: free', { ...r, pc: 'insert', seen: top?.seq ?? 0 });
        break;
      case 'insert': {
        if (top?.live) {
          idle('insert: the newest row is live, nothing written');
          break;
        }
        // The chain rule, evaluated in the insert itself.
        const fire = top !== undefined && top.fire > s.wm ? top.fire : r.end;
        const rows = push({ owner: i, fire, live: true });
        const how = `insert: row (r${i}, fire ${fire})${fire === r.end ? '' : ' (chain: retake)'}`;
        go(how, { ...r, pc: 'readback' }, { rows });
        if (scope.late !== 'none') go(`${how}, acknowledged late`, { ...r, pc: 'late', end: fire }, { rows });
        break;
      }
      case 'late': {
        if (scope.late === 'release') {
          if (top !== undefined && top.owner === i && top.seq > r.seen) idle('late: releases its claim (conditional)', { rows: push({ owner: i, fire: top.fire, live: false }) });
          else idle('late: its claim is not the newest row, nothing written');
          break;
        }
        const rows = s.rows.filter((row) => !(row.owner === i && row.seq > r.seen));
        idle(`late: deletes its rows newer than its free read's${rows.length === 0 ? ' — no row left' : ''}`, { rows });
        break;
      }
      case 'readback':
        if (top !== undefined && top.owner === i && top.seq > r.seen) go(`read-back: won fire ${top.fire}, watermark ${s.wm}`, { ...r, pc: 'confirm', end: top.fire, start: s.wm });
        else idle('read-back: lost');
        break;
      case 'confirm':
        if (conditional.confirm && !mine) go('confirm (conditional): nothing written', { ...r, pc: 'confirm-check' });
        else go(`confirm row written${over}`, { ...r, pc: 'confirm-check' }, { rows: push({ owner: i, fire: r.end, live: true }) });
        break;
      case 'confirm-check':
        if (!mine) idle('confirm read-back: lost, nothing ran');
        else if (r.start >= r.end) go('confirmed, already run (the watermark read with the claim): release', { ...r, pc: 'release' });
        else go(`confirmed: runs window ${r.start}-${r.end}`, { ...r, pc: 'run' });
        break;
      case 'run': {
        const w = `${r.start}-${r.end}`;
        const written = s.out.includes(w) ? s.out : [...s.out, w].sort();
        go('output written', { ...r, pc: 'holds' }, { out: written });
        // The output is in, a later statement fails: released as a failure (no holds check).
        if (s.failuresUsed < scope.failures) go('output written, then the run fails', { ...r, pc: 'release' }, { out: written, failuresUsed: s.failuresUsed + 1 });
        break;
      }
      case 'holds':
        if (r.renew === 'lost' || !mine) go('holds check: taken over, no commit, no release', { ...r, pc: 'finish' });
        else go('holds check: holds', { ...r, pc: 'commit' });
        break;
      case 'commit': {
        const wm = Math.max(s.wm, r.end);
        go(`watermark := ${r.end} (fenced)`, { ...r, pc: 'release' }, { wm, wmBack: s.wmBack || wm < s.wm });
        break;
      }
      case 'release':
        // renewal.stop() first: it waits for a renewal in flight.
        if (r.renew === 'pending') break;
        if (conditional.release && !mine) idle('release (conditional): nothing written');
        else idle(`release row written${over}`, { rows: push({ owner: i, fire: r.end, live: false }) });
        break;
      case 'finish':
        if (r.renew !== 'pending') idle('stops');
        break;
      default:
        break;
    }
    return out;
  }

  return {
    initial,
    key: (s) => JSON.stringify([s.latest, s.wm, s.rows.map((r) => [r.owner, r.fire, r.live ? 1 : 0, r.seq]), s.out, s.wmBack, s.runners.map((r) => [r.pc, r.end, r.start, r.seen, r.renew]), s.failuresUsed, s.crashesUsed]),
    next(s) {
      const all = s.runners.flatMap((_, i) => steps(s, i));
      if (s.latest < scope.maxFire) all.push({ label: `fire ${s.latest + 1} comes due`, state: { ...s, latest: s.latest + 1 } });
      s.rows.forEach((row, k) => {
        if (row.live) {
          const rows = s.rows.map((x, j) => (j === k ? { ...x, live: false } : x));
          all.push({ label: `lease of r${row.owner}'s row (fire ${row.fire}) expires (its holder paused past it)`, state: norm({ ...s, rows }) });
        }
        if (scope.merges && k < s.rows.length - 1) {
          all.push({ label: `merge drops r${row.owner}'s row (fire ${row.fire})`, state: norm({ ...s, rows: s.rows.filter((_, j) => j !== k) }) });
        }
      });
      return all;
    },
  };
}
