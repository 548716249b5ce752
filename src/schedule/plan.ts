import { latestFire } from './arithmetic.js';
import type { HuntSpec } from './hunt-spec.js';

/** One due row of a tick, with the schedule (hunt_schedule, the one offset source) it was computed from. */
export interface DueHunt {
  readonly huntId: string;
  readonly fire: number;
  readonly requested: boolean;
  readonly intervalSeconds: number;
  readonly phaseOffset: number;
  /**
   * Where the owed window starts (the watermark; 0 for a hunt that never ran): the
   * longest-waiting hunt has the oldest (aging, docs/runner.md#progress). Absent: the fire.
   */
  readonly owedFrom?: number;
}

/** What one coordination read says is due (Coordinator.tick in coordination/coordinator.ts reads it). */
export interface TickSnapshot {
  readonly serverNow: number;
  /** The shim's backlog (dueCountSql) at the same clock reading. */
  readonly backlog: number;
  readonly due: ReadonlyArray<DueHunt>;
}

/**
 * Pure tick planning (docs/runner.md#a-tick, step 2): which due hunts this runner starts now.
 * The longest owed first (the oldest owed window, aging), not alphabetical; hunts this runner is
 * already running or does not know are left alone; at most `cap` in flight.
 * Equal fires are common (every 2 s hunt fires on the even second), so ties are
 * broken by a hash of (runner, hunt): each runner walks the tie in its own
 * order and peers rarely race for the same claim.
 */
export interface PlannedRun {
  readonly spec: HuntSpec;
  readonly fire: number;
  readonly requested: boolean;
  /** hunt_schedule's interval and offset at this tick: the one offset source (docs/smoothing.md). */
  readonly intervalSeconds: number;
  readonly phaseOffset: number;
  /** ClickHouse clock at this tick minus the fire. */
  readonly latenessSeconds: number;
  /** Where the owed window starts (the planning order). */
  readonly owedFrom: number;
}

export interface TickPlan {
  readonly start: readonly PlannedRun[];
  /** Due in ClickHouse but not in this runner's hunts directory (a peer's newer config, or a stale row). */
  readonly unknown: readonly string[];
  /** Due and known, but over the cap this tick. */
  readonly deferred: number;
}

/** FNV-1a, 32 bits: cheap and stable; only spreads ties, never security. */
export function tieBreak(runnerId: string, huntId: string): number {
  let hash = 0x811c9dc5;
  for (const ch of `${runnerId}\u0000${huntId}`) {
    hash ^= ch.codePointAt(0) ?? 0;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

export function planTick(
  snapshot: TickSnapshot,
  hunts: ReadonlyMap<string, HuntSpec>,
  inFlight: ReadonlySet<string>,
  cap: number,
  runnerId = '',
): TickPlan {
  const unknown: string[] = [];
  const candidates: PlannedRun[] = [];
  for (const row of snapshot.due) {
    const spec = hunts.get(row.huntId);
    if (!spec) unknown.push(row.huntId);
    else if (!inFlight.has(row.huntId)) {
      candidates.push({
        spec,
        fire: row.fire,
        requested: row.requested,
        intervalSeconds: row.intervalSeconds,
        phaseOffset: row.phaseOffset,
        latenessSeconds: snapshot.serverNow - row.fire,
        owedFrom: row.owedFrom ?? row.fire,
      });
    }
  }
  const rank = new Map(candidates.map((c) => [c.spec.huntId, tieBreak(runnerId, c.spec.huntId)]));
  // Aging: the oldest owed window first. The due query yields only a hunt's latest fire, so
  // ordering by it would never make a hunt deferred tick after tick more urgent than a fresh one.
  candidates.sort((a, b) => a.owedFrom - b.owedFrom || (rank.get(a.spec.huntId) ?? 0) - (rank.get(b.spec.huntId) ?? 0));
  const room = Math.max(0, cap - inFlight.size);
  return { start: candidates.slice(0, room), unknown, deferred: Math.max(0, candidates.length - room) };
}

/**
 * An in-flight run whose hunt has a newer scheduled fire than the one it runs: an
 * overrun. `schedule` is hunt_schedule's interval and offset as the tick that
 * started the run read them (never the file's hash: the table is the offset source).
 */
export function overrunFire(
  schedule: { readonly intervalSeconds: number; readonly phaseOffset: number },
  runningFire: number,
  serverNow: number,
): number | undefined {
  const latest = latestFire(serverNow, schedule.intervalSeconds, schedule.phaseOffset);
  return latest > runningFire ? latest : undefined;
}
