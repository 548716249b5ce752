import type { Invariant } from './search.js';

/**
 * What both claim models share: one hunt with one owed fire, 2–3 runners, discrete
 * time in ticks (states are kept relative to now, so no horizon is needed), and the
 * crash points of a run. Time only moves
 * when no runner has a step due now (a poll deadline, a wake-up, the next step of
 * a run), so every runner keeps polling and a run takes no time unless it stalls.
 */
/**
 * `after-claim`: won, nothing run yet; `after-output`: the output INSERT is done and the
 * watermark not (the "before watermark" point); `after-watermark`: done, not released.
 */
export type CrashPoint = 'after-claim' | 'after-output' | 'after-watermark';

export interface CommonScope {
  readonly runners: 2 | 3;
  /** Lease length in ticks. */
  readonly lease: number;
  /** A runner polls at least every `poll` ticks. */
  readonly poll: number;
  /** Where a run may crash (the runner never comes back; a restart is a new runner). */
  readonly crashes: readonly CrashPoint[];
  readonly maxCrashes: number;
  /**
   * A run may stall past its lease (no renewal reaches ClickHouse for a whole lease):
   * the timing assumption both modes rest on.
   */
  readonly stall: boolean;
  /** A run's output INSERT and watermark may each come up to this many ticks after the won claim (less than the lease). */
  readonly runTime: number;
  /** Ticks by which a write may become visible after its acknowledgement (0: quorum / one server). */
  readonly replicaLag: number;
}

/** A run's phases: `running` = claim won, `output` = output inserted, `marked` = watermark written. */
export const RUN_PHASES = ['running', 'output', 'marked'] as const;
export type RunPhase = (typeof RUN_PHASES)[number];

export const CRASH_AT: Readonly<Record<RunPhase, CrashPoint>> = { running: 'after-claim', output: 'after-output', marked: 'after-watermark' };

/** The state every model carries for the invariants. */
export interface Observed {
  readonly t: number;
  /** Output INSERTs of the fire (raw, as a table that does not deduplicate would keep them). */
  readonly out: number;
  /** Crashes between the output INSERT and the watermark: each may rerun the output (same dedup token). */
  readonly dupOk: number;
  /** Tick from which the watermark is visible, -1 while unwritten. */
  readonly wm: number;
  readonly phases: readonly string[];
}

export const invariants: ReadonlyArray<Invariant<Observed>> = [
  {
    name: 'one run at a time: no two runners between a won claim and the watermark',
    holds: (s) => s.phases.filter((p) => p === 'running' || p === 'output').length <= 1,
  },
  {
    // Exactly once, except a crash after the output INSERT and before the watermark: the fire is
    // still owed and runs again, with the same insert_deduplication_token (docs/claim-protocol.md).
    name: 'the output is written once (again only after a crash between output and watermark)',
    holds: (s) => s.out <= 1 + s.dupOk,
  },
];

export const fireDone = (s: Observed): boolean => s.wm >= 0;
