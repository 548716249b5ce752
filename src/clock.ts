/** Time source, injected wherever time matters so tests can drive it. */
export interface Clock {
  /** Milliseconds since the epoch. */
  nowMs(): number;
}

export const systemClock: Clock = Object.freeze({ nowMs: () => Date.now() });

/** A clock a test moves by hand. */
export class ManualClock implements Clock {
  constructor(private currentMs = 0) {}
  nowMs(): number {
    return this.currentMs;
  }
  set(ms: number): void {
    this.currentMs = ms;
  }
  advance(ms: number): void {
    this.currentMs += ms;
  }
}
