import { CRASH_AT, type CommonScope, type Observed, type RunPhase } from './scope.js';
import type { Step, TransitionSystem } from './search.js';

/**
 * The table protocol (docs/claim-protocol.md#the-claim) as a transition system:
 * free read → conditional insert → (late? stop) → wait until ack + settle + margin →
 * read back the two newest lease rows → won / lost (tie: lost) → watermark recheck →
 * output → watermark → release row. Lease rows live in a ReplacingMergeTree: only
 * the newest by (claimed DESC, owner ASC) counts, a tie on `claimed` loses.
 *
 * Visibility: a write evaluated at tick `te` and acknowledged at `ta` becomes visible
 * at some `v` in [te, ta] — plus up to `replicaLag` ticks when quorum is broken —
 * and a read at tick t sees it only if v < t (a read "starts after" the write).
 */
export interface TableScope extends CommonScope {
  readonly settle: number;
  readonly margin: number;
  /** true: a claim is late when ack − free read ≥ settle (the code); false: only when > settle. */
  readonly strict: boolean;
  /** Slowest acknowledgement after the free read, in ticks (settle or more makes a claim late). */
  readonly maxAck: number;
  /** Ticks a planned claim may wait between the tick's due query and its free read (a claim queue, a slow tick). */
  readonly planDelay: number;
  /** false: the read-back ignores a tie on `claimed` (to show why the rule is there). */
  readonly tieRule: boolean;
}

type Pc = 'idle' | 'planned' | 'claiming' | 'waiting' | RunPhase | 'done' | 'crashed';

interface Runner {
  readonly pc: Pc;
  /** idle: earliest next poll / poll deadline; planned: due-query tick; claiming: free-read tick; waiting: wake tick. */
  readonly a: number;
  readonly b: number;
  readonly late: boolean;
  /** A stalled run acts again only from this tick. */
  readonly stalledUntil: number;
}

interface Row {
  readonly owner: number;
  readonly claimed: number;
  readonly until: number;
  readonly visible: number;
}

export interface TableState extends Observed {
  readonly rows: readonly Row[];
  readonly runners: readonly Runner[];
  readonly crashesUsed: number;
  readonly stalls: number;
}

const newestFirst = (x: Row, y: Row) => y.claimed - x.claimed || x.owner - y.owner;
const seen = (rows: readonly Row[], t: number) => rows.filter((r) => r.visible < t).sort(newestFirst);

/** Rows that can never again be among the two newest a read sees (two visible newer rows) are dropped. */
function prune(rows: readonly Row[], t: number): Row[] {
  const sorted = [...rows].sort(newestFirst);
  let visibleAbove = 0;
  return sorted.filter((r) => {
    const keep = visibleAbove < 2;
    if (r.visible < t) visibleAbove += 1;
    return keep;
  });
}

function claimedRank(s: TableState, r: Row): string {
  const distinct = [...new Set(s.rows.map((x) => x.claimed))].sort((x, y) => x - y);
  return `${distinct.indexOf(r.claimed)}${r.claimed === s.t ? 'now' : ''}`;
}

const idle = (t: number, poll: number): Runner => ({ pc: 'idle', a: t + 1, b: t + poll, late: false, stalledUntil: 0 });

export function tableProtocol(scope: TableScope): TransitionSystem<TableState> {
  const { settle, margin, lease, poll } = scope;
  const initial: TableState = {
    t: 0,
    rows: [],
    runners: Array.from({ length: scope.runners }, () => idle(-1, poll)),
    out: 0,
    dupOk: 0,
    wm: -1,
    crashesUsed: 0,
    stalls: 0,
    phases: Array.from({ length: scope.runners }, () => 'idle'),
  };
  const with_ = (s: TableState, i: number, r: Runner, patch: Partial<TableState> = {}): TableState => {
    const runners = s.runners.map((x, j) => (j === i ? r : x));
    const rows = prune(patch.rows ?? s.rows, s.t);
    return { ...s, ...patch, rows, runners, phases: runners.map((x) => x.pc) };
  };
  const stalled = (s: TableState, r: Runner) => r.stalledUntil > s.t;
  const urgent = (s: TableState, r: Runner): boolean => {
    if (r.pc === 'idle') return s.t >= r.b;
    if (r.pc === 'planned') return s.t >= r.a + scope.planDelay;
    if (r.pc === 'claiming') return s.t >= r.a + 1;
    if (r.pc === 'waiting') return s.t >= r.b;
    if (r.pc === 'running' || r.pc === 'output') return !stalled(s, r) && s.t >= r.a + scope.runTime;
    if (r.pc === 'marked') return !stalled(s, r);
    return false;
  };
  const lagChoices = (at: number) => Array.from({ length: scope.replicaLag + 1 }, (_, d) => at + d);

  function runnerSteps(s: TableState, i: number): Step<TableState>[] {
    const r = s.runners[i] as Runner;
    const { t } = s;
    const name = `t${t} r${i}`;
    const steps: Step<TableState>[] = [];
    const after = (label: string, state: TableState) => steps.push({ label: `${name} ${label}`, state });
    switch (r.pc) {
      case 'idle': {
        if (t < r.a) break;
        const [top] = seen(s.rows, t);
        if (s.wm >= 0 && s.wm < t) after('due query: watermark covers the fire', with_(s, i, { ...r, pc: 'done' }));
        else if (top && top.until > t) after('due query: leased, not due', with_(s, i, idle(t, poll)));
        else after('due query: due', with_(s, i, { ...r, pc: 'planned', a: t }));
        break;
      }
      case 'planned': {
        // The free read comes after the tick's due query, up to planDelay ticks later.
        const [top] = seen(s.rows, t);
        if (top && top.until > t) after('free read: live lease, lost', with_(s, i, idle(t, poll)));
        else after('free read: free', with_(s, i, { pc: 'claiming', a: t, b: 0, late: false, stalledUntil: 0 }));
        break;
      }
      case 'claiming': {
        const [top] = seen(s.rows, t);
        const inserts = !(top && top.until > t);
        for (let ack = t; ack - r.a <= scope.maxAck; ack += 1) {
          const late = scope.strict ? ack - r.a >= settle : ack - r.a > settle;
          const waiting: Runner = { pc: 'waiting', a: 0, b: late ? ack : ack + settle + margin, late, stalledUntil: 0 };
          const how = `ack after ${ack - r.a}${late ? ' (late)' : ''}`;
          if (!inserts) {
            after(`insert: condition false, nothing written; ${how}`, with_(s, i, waiting));
            continue;
          }
          const visibleAt = new Set([t, ...lagChoices(ack)]);
          for (const visible of visibleAt) {
            const row: Row = { owner: i, claimed: t, until: t + lease, visible };
            const tie = s.rows.some((x) => x.claimed === t && x.owner !== i);
            after(`insert: row written${tie ? ' (tie)' : ''}, visible after ${visible}; ${how}`, with_(s, i, waiting, { rows: [...s.rows, row] }));
          }
        }
        break;
      }
      case 'waiting': {
        if (t < r.b) break;
        if (r.late) {
          after('late: the claim does not stand', with_(s, i, idle(t, poll)));
          break;
        }
        const [top, second] = seen(s.rows, t);
        const tie = scope.tieRule && top !== undefined && second !== undefined && second.claimed === top.claimed && second.owner !== i;
        if (!top || top.owner !== i || tie) after(`read-back: lost${tie ? ' (tie)' : ''}`, with_(s, i, idle(t, poll)));
        else if (s.wm >= 0 && s.wm < t) {
          const release: Row = { owner: i, claimed: t, until: 0, visible: t };
          after('read-back: won, already run; release', with_(s, i, idle(t, poll), { rows: [...s.rows, release] }));
        } else after('read-back: won', with_(s, i, { ...r, pc: 'running', a: t }));
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
        if (r.pc === 'running') after('output INSERT', with_(s, i, { ...r, pc: 'output' }, { out: s.out + 1 }));
        if (r.pc === 'output') {
          for (const v of lagChoices(t)) after(`watermark, visible after ${v}`, with_(s, i, { ...r, pc: 'marked' }, { wm: s.wm >= 0 ? Math.min(s.wm, v) : v }));
        }
        if (r.pc === 'marked') {
          for (const v of lagChoices(t)) {
            const release: Row = { owner: i, claimed: t, until: 0, visible: v };
            after(`release, visible after ${v}`, with_(s, i, { ...r, pc: 'done' }, { rows: [...s.rows, release] }));
          }
        }
        break;
      }
      default:
        break;
    }
    return steps;
  }

  /** A runner's ticks that still matter, relative to now. */
  const relativeTicks = (t: number, r: Runner): [number, number] => {
    if (r.pc === 'idle') return [Math.max(r.a - t, 0), r.b - t];
    if (r.pc === 'planned') return [Math.max(r.a - t, -scope.planDelay), 0];
    if (r.pc === 'claiming') return [r.a - t, 0];
    if (r.pc === 'waiting') return [0, r.b - t];
    if (r.pc === 'running' || r.pc === 'output') return [Math.max(r.a - t, -scope.runTime), 0];
    return [0, 0];
  };

  return {
    initial,
    // Time-shift invariant: every tick is kept relative to now, so the space is finite with no horizon.
    // Exact ticks only where they still matter: "visible already", "poll allowed already", "not stalled" are one value each.
    key: (s) =>
      JSON.stringify([
        // `claimed` only by rank (and whether a new claim this tick would tie it); an expired lease is just expired.
        s.rows.map((r) => [r.owner, claimedRank(s, r), r.until > s.t ? r.until - s.t : 'x', r.visible < s.t ? 'v' : r.visible - s.t]),
        s.runners.map((r) => [r.pc, ...relativeTicks(s.t, r), r.late ? 1 : 0, Math.max(r.stalledUntil - s.t, 0)]),
        s.out,
        s.dupOk,
        s.wm < 0 ? 'none' : s.wm < s.t ? 'v' : s.wm - s.t,
        s.crashesUsed,
        s.stalls,
      ]),
    next(s) {
      const steps = s.runners.flatMap((_, i) => runnerSteps(s, i));
      // A background merge keeps one visible row per hunt, the newest; of rows tied on `claimed`,
      // any may survive. (Untied, a merge changes no read: only the newest row and a tie count.)
      const visible = seen(s.rows, s.t);
      const [top, second] = visible;
      if (top && second && top.claimed === second.claimed) {
        for (const keep of visible.filter((r) => r.claimed === top.claimed)) {
          const rows = s.rows.filter((r) => r === keep || r.visible >= s.t);
          steps.push({ label: `t${s.t} merge keeps r${keep.owner}'s tied row`, state: { ...s, rows: prune(rows, s.t) } });
        }
      }
      if (!s.runners.some((r) => urgent(s, r))) {
        const t = s.t + 1;
        steps.push({ label: `time ${t}`, state: { ...s, t, rows: prune(s.rows, t) } });
      }
      return steps;
    },
  };
}
