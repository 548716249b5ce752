import { planTick, type DueHunt } from '../src/schedule/plan.js';
import type { HuntSpec } from '../src/schedule/hunt-spec.js';
import { goal, type BenchLine } from './report.js';

/**
 * Over capacity (docs/runner.md#progress): twice as many hunts due every poll as the fleet can
 * run. The fleet is the real tick planner (`planTick`) of R runners with cap C each, on one
 * shared snapshot per poll: a hunt one runner claimed is gone for the next (a lost claim in a
 * real fleet), a run takes one poll, and its watermark then moves to the fire it claimed.
 * Measured: the longest wait of any hunt, from its oldest owed fire to the start of the run
 * that covers it, against the bound poll × ceil(owed hunts / capacity) + one run. Baseline:
 * the same fleet ordering by the latest fire alone (no aging), as ticks did before.
 */
const POLL_SECONDS = 5;
const RUNNERS = 4;
const CAP = 5;
const HUNTS = 2 * RUNNERS * CAP;
const POLLS = 200;

function spec(huntId: string): HuntSpec {
  return {
    huntId,
    file: `${huntId}.yaml`,
    intervalSeconds: POLL_SECONDS,
    phaseOffset: 0,
    pinnedOffset: 0,
    scheduleText: `${POLL_SECONDS}s`,
    statements: [],
    windowColumn: undefined,
    settings: {},
    ceilings: {},
    maxCatchupSeconds: undefined,
  };
}

/** The longest wait in seconds (a hunt never run counts the whole simulation). */
function longestWait(aging: boolean): number {
  const hunts = new Map<string, HuntSpec>();
  const watermark = new Map<string, number>();
  for (let i = 0; i < HUNTS; i += 1) {
    const id = `h${String(i).padStart(3, '0')}`;
    hunts.set(id, spec(id));
    watermark.set(id, 0);
  }
  const start = POLL_SECONDS;
  let longest = 0;
  for (let poll = 1; poll <= POLLS; poll += 1) {
    const now = poll * POLL_SECONDS;
    const claimed = new Set<string>();
    const due: DueHunt[] = [...hunts.keys()].map((huntId) => {
      const wm = watermark.get(huntId) ?? 0;
      return { huntId, fire: now, requested: false, intervalSeconds: POLL_SECONDS, phaseOffset: 0, ...(aging ? { owedFrom: wm } : {}) };
    });
    const started: Array<{ huntId: string; fire: number }> = [];
    for (let r = 0; r < RUNNERS; r += 1) {
      const plan = planTick({ serverNow: now, backlog: due.length, due: due.filter((d) => !claimed.has(d.huntId)) }, hunts, new Set(), CAP, `runner-${r}`);
      for (const run of plan.start) {
        claimed.add(run.spec.huntId);
        started.push({ huntId: run.spec.huntId, fire: run.fire });
        // Its oldest owed fire is the first after its watermark (the first fire for a new hunt).
        const oldest = Math.max(start, (watermark.get(run.spec.huntId) ?? 0) + POLL_SECONDS);
        longest = Math.max(longest, now - oldest);
      }
    }
    // A run takes one poll: its watermark moves before the next tick.
    for (const s of started) watermark.set(s.huntId, s.fire);
  }
  const end = POLLS * POLL_SECONDS;
  for (const wm of watermark.values()) longest = Math.max(longest, end - Math.max(start, wm + POLL_SECONDS));
  return longest;
}

export function benchOverCapacity(): BenchLine[] {
  const capacity = RUNNERS * CAP;
  const bound = POLL_SECONDS * Math.ceil(HUNTS / capacity) + POLL_SECONDS;
  const withAging = longestWait(true);
  const without = longestWait(false);
  return [
    {
      kind: 'figure',
      name: `over capacity: ${HUNTS} hunts due every ${POLL_SECONDS} s poll, ${RUNNERS} runners × cap ${CAP} (the tick planner, ${POLLS} polls): longest wait of any hunt`,
      measured: `${withAging} s with aging`,
      baseline: `${without} s ordering by the latest fire (no aging)${without >= (POLLS - 1) * POLL_SECONDS ? ': some hunts never ran' : ''}`,
      goal: `≤ ${bound} s (poll × ceil(owed hunts / capacity) + one run)`,
      outcome: goal(withAging <= bound),
      shortName: 'over capacity, longest wait',
      headline: `${withAging} s (bound ${bound} s; no aging ${without} s)`,
    },
  ];
}
