import { performance } from 'node:perf_hooks';

/** Time source, injected wherever time matters so tests can drive it. */
export interface Clock {
  /** Milliseconds since the epoch: a wall clock, which NTP may step back or forward. */
  nowMs(): number;
  /**
   * Milliseconds on a monotonic clock with an arbitrary origin: never goes back,
   * unaffected by wall-clock steps. Use it for every DURATION (a claim's settle
   * window, docs/claim-protocol.md), never for a point in time.
   */
  monotonicMs(): number;
}

export const systemClock: Clock = Object.freeze({ nowMs: () => Date.now(), monotonicMs: () => performance.now() });

/**
 * A clock a test moves by hand. `advance` and a forward `set` move both
 * readings; `stepWall` moves only the wall clock (an NTP step), which a
 * duration measured on the monotonic reading must not see.
 */
export class ManualClock implements Clock {
  private monotonic = 0;
  constructor(private currentMs = 0) {}
  nowMs(): number {
    return this.currentMs;
  }
  monotonicMs(): number {
    return this.monotonic;
  }
  set(ms: number): void {
    this.monotonic += Math.max(0, ms - this.currentMs);
    this.currentMs = ms;
  }
  advance(ms: number): void {
    if (ms < 0) throw new RangeError(`advance(${ms}): time only moves forward; use stepWall for a wall-clock step`);
    this.currentMs += ms;
    this.monotonic += ms;
  }
  /** Steps the wall clock by `ms` (either way) without any time passing. */
  stepWall(ms: number): void {
    this.currentMs += ms;
  }
}
