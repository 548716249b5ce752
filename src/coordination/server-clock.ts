import type { Clock } from '../clock.js';

/**
 * The coordination clock. Decisions (due, live lease) are made in SQL with
 * ClickHouse's `now()`; a few writes whose values are plain data (a renewal's
 * lease_until, a heartbeat's `seen`) need that clock on the client side, so
 * they use the last server reading plus the local time elapsed since it
 * (on the monotonic clock, so a wall-clock step does not move the estimate).
 * The reading is whole seconds, so the estimate lags by < 1 s plus the query
 * latency: a renewed lease ends up to ~1 s early, never late.
 *
 * `clock` mode replaces ClickHouse's clock with the injected Clock everywhere
 * (bound as `{now:Int64}` in SQL), so tests drive simulated time.
 */
export type CoordinationTime = { readonly kind: 'server' } | { readonly kind: 'clock'; readonly clock: Clock };

export class ServerTime {
  private readingSeconds: number | undefined;
  private readAtMs = 0;

  constructor(
    readonly time: CoordinationTime,
    private readonly local: Clock,
  ) {}

  /** Records a ClickHouse clock reading (epoch seconds) taken just now. */
  observe(serverSeconds: number): void {
    this.readingSeconds = serverSeconds;
    this.readAtMs = this.local.monotonicMs();
  }

  /** Best estimate of the coordination clock, or undefined before the first reading. */
  nowSeconds(): number | undefined {
    if (this.time.kind === 'clock') return Math.floor(this.time.clock.nowMs() / 1000);
    if (this.readingSeconds === undefined) return undefined;
    return this.readingSeconds + Math.floor((this.local.monotonicMs() - this.readAtMs) / 1000);
  }
}
