import { latestFire } from '../schedule/arithmetic.js';

/**
 * Pure: did a set of runs cover every owed fire exactly once? (`verify-coordination`,
 * docs/operations.md#verify-coordination.) Input: each hunt's schedule and the rows
 * its runs wrote; a run covers the fires in its window `(start, end]`.
 *
 * Owed fires of a hunt: the scheduled fires after its first run's window start
 * (before its first run there is no watermark: the first run covers one interval,
 * docs/hunts.md) up to `endNow`. A hunt that never ran owes every fire after
 * `startNow`. A fire covered by no window is missed; by two or more, run twice. Two windows
 * of one hunt that intersect are also counted as a pair (`overlaps`): two runs of one hunt at
 * once, or one starting from a watermark the other had not moved yet.
 */
export interface HuntRuns {
  readonly huntId: string;
  readonly intervalSeconds: number;
  readonly phaseOffset: number;
  /** The output rows of its runs, any order; `runStart` (epoch seconds): when the run ran, where known. */
  readonly windows: ReadonlyArray<{ readonly start: number; readonly end: number; readonly runStart?: number }>;
}

export interface Coverage {
  /** Owed fires in all. */
  readonly owed: number;
  /** Owed fires that were a run's own fire (the rest were folded into a later run's window). */
  readonly ownRun: number;
  readonly missed: number;
  /** Of the missed: fires after the hunt's last run (still owed when counted: late, not yet lost); the rest are gaps a later run went past. */
  readonly unrun: number;
  readonly doubled: number;
  /** Pairs of windows of one hunt whose (start, end] intersect. */
  readonly overlaps: number;
  /** Up to 20 examples, `hunt@fire×covering`. */
  readonly examples: readonly string[];
}

export function coverage(hunts: readonly HuntRuns[], startNow: number, endNow: number): Coverage {
  let owed = 0;
  let ownRun = 0;
  let missed = 0;
  let unrun = 0;
  let doubled = 0;
  let overlaps = 0;
  const examples: string[] = [];
  for (const h of hunts) {
    const windows = [...h.windows].sort((a, b) => a.end - b.end);
    const lo = windows[0]?.start ?? startNow;
    for (const [i, a] of windows.entries()) {
      for (const b of windows.slice(i + 1)) if (Math.max(a.start, b.start) < Math.min(a.end, b.end)) overlaps += 1;
    }
    const ends = new Set(windows.map((w) => w.end));
    const lastEnd = windows.at(-1)?.end ?? Number.NEGATIVE_INFINITY;
    const first = latestFire(lo, h.intervalSeconds, h.phaseOffset) + h.intervalSeconds;
    for (let f = first; f <= endNow; f += h.intervalSeconds) {
      owed += 1;
      if (ends.has(f)) ownRun += 1;
      const covering = windows.filter((w) => w.start < f && f <= w.end).length;
      if (covering === 1) continue;
      if (covering === 0) {
        missed += 1;
        if (f > lastEnd) unrun += 1;
      } else doubled += 1;
      if (examples.length < 20) examples.push(`${h.huntId}@${f}×${covering}`);
    }
  }
  return { owed, ownRun, missed, unrun, doubled, overlaps, examples };
}

/** An owed fire and when the first run whose window covered it ran (`runStart`, epoch seconds). */
export interface FireStart {
  readonly huntId: string;
  readonly fire: number;
  readonly runStart: number;
  /** runStart − fire, at least 0. */
  readonly seconds: number;
}

/**
 * Each owed fire that a run covered, with the earliest `runStart` of the windows covering it
 * (a fire folded into a later run's window waited for that run): its lateness. Fires whose
 * covering runs' starts are unknown are left out. `verify-coordination` gives each window the
 * moment its output row was written (verify-report.ts).
 */
export function fireStarts(hunts: readonly HuntRuns[], startNow: number, endNow: number): FireStart[] {
  const out: FireStart[] = [];
  for (const h of hunts) {
    const windows = [...h.windows].sort((a, b) => a.end - b.end);
    const lo = windows[0]?.start ?? startNow;
    for (let f = latestFire(lo, h.intervalSeconds, h.phaseOffset) + h.intervalSeconds; f <= endNow; f += h.intervalSeconds) {
      const starts = windows.filter((w) => w.start < f && f <= w.end && w.runStart !== undefined).map((w) => w.runStart as number);
      if (starts.length === 0) continue;
      const runStart = Math.min(...starts);
      out.push({ huntId: h.huntId, fire: f, runStart, seconds: Math.max(0, runStart - f) });
    }
  }
  return out;
}

/** The `n` latest of them, latest first (ties by hunt and fire, so a report reads the same twice). */
export function latestFires(starts: readonly FireStart[], n: number): FireStart[] {
  return [...starts].sort((a, b) => b.seconds - a.seconds || a.huntId.localeCompare(b.huntId) || a.fire - b.fire).slice(0, n);
}

/** The q-quantile (0–1) of `values` by nearest rank; undefined when empty. */
export function quantile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}
