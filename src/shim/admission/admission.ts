import type { Clock } from '../../clock.js';
import { FairQueue, type Waiting } from './fair-queue.js';
import { realTimers, type Timers } from './timers.js';

/**
 * Admission of ClickHouse queries (docs/failsafe.md#admission): at most
 * `maxInflight` in flight, at most `maxInflightPerQuery` of one catalogue
 * query. A query that cannot start now waits in a bounded fair queue until a
 * slot frees or its give-up time comes; only then is it refused (`overload`).
 * Pure policy apart from the give-up timers; durations on the clock's monotonic reading.
 */
export interface AdmissionLimits {
  readonly maxInflight: number;
  readonly maxInflightPerQuery: number;
  /** Most queries waiting at once (memory bound); past it a new one is refused at once. */
  readonly maxQueued: number;
}

export type Ticket =
  | { readonly kind: 'admitted'; readonly waitedMs: number; release(): void }
  | { readonly kind: 'refused'; readonly waitedMs: number; readonly why: 'queue_full' | 'gave_up' };

interface Waiter extends Waiting {
  readonly enqueuedMs: number;
  readonly resolve: (ticket: Ticket) => void;
  timer: unknown;
}

export class Admission {
  private running = 0;
  private readonly runningPerQuery = new Map<string, number>();
  private readonly queue = new FairQueue<Waiter>();

  constructor(
    readonly limits: AdmissionLimits,
    private readonly clock: Clock,
    private readonly timers: Timers = realTimers,
  ) {}

  get inflight(): number {
    return this.running;
  }

  get queued(): number {
    return this.queue.size;
  }

  inflightOf(query: string): number {
    return this.runningPerQuery.get(query) ?? 0;
  }

  /**
   * A slot for one ClickHouse query of `query`: at once when the caps allow,
   * else after waiting at most `waitMs` (≤ 0: no wait). Never rejects.
   */
  acquire(query: string, waitMs: number): Promise<Ticket> {
    const now = this.tryAcquire(query);
    if (now !== undefined) return Promise.resolve(now);
    if (waitMs <= 0) return Promise.resolve({ kind: 'refused', waitedMs: 0, why: 'gave_up' });
    if (this.queue.size >= this.limits.maxQueued) return Promise.resolve({ kind: 'refused', waitedMs: 0, why: 'queue_full' });
    return new Promise<Ticket>((resolve) => {
      const waiter: Waiter = { query, gone: false, enqueuedMs: this.clock.monotonicMs(), resolve, timer: undefined };
      waiter.timer = this.timers.set(() => {
        if (waiter.gone) return;
        this.queue.leave(waiter);
        resolve({ kind: 'refused', waitedMs: this.waited(waiter), why: 'gave_up' });
      }, waitMs);
      this.queue.push(waiter);
      // A queue that was empty may hold a startable query of another kind (this one's cap is full).
      this.drain();
    });
  }

  /** A slot at once, synchronously, when `acquire` would admit without waiting; else undefined (nothing changed). */
  tryAcquire(query: string): Ticket | undefined {
    // Waiters already queued go first; a newcomer starts at once only when nobody waits.
    return this.queue.size === 0 && this.canStart(query) ? this.admit(query, 0) : undefined;
  }

  /** A summary for the `overload` message. */
  describe(query: string): string {
    const { maxInflight, maxInflightPerQuery, maxQueued } = this.limits;
    return `${this.running} of at most ${maxInflight} queries in flight, ${this.inflightOf(query)} of at most ${maxInflightPerQuery} of this query, ${this.queue.size} of at most ${maxQueued} waiting`;
  }

  private canStart(query: string): boolean {
    return this.running < this.limits.maxInflight && this.inflightOf(query) < this.limits.maxInflightPerQuery;
  }

  private waited(waiter: Waiter): number {
    return Math.max(0, this.clock.monotonicMs() - waiter.enqueuedMs);
  }

  private admit(query: string, waitedMs: number): Ticket {
    this.running += 1;
    this.runningPerQuery.set(query, this.inflightOf(query) + 1);
    let released = false;
    return {
      kind: 'admitted',
      waitedMs,
      release: () => {
        if (released) return;
        released = true;
        this.running -= 1;
        const left = this.inflightOf(query) - 1;
        if (left <= 0) this.runningPerQuery.delete(query);
        else this.runningPerQuery.set(query, left);
        this.drain();
      },
    };
  }

  /** Hands free slots to waiters, round-robin across queries. */
  private drain(): void {
    while (this.running < this.limits.maxInflight) {
      const waiter = this.queue.next((query) => this.canStart(query));
      if (waiter === undefined) return;
      this.timers.clear(waiter.timer);
      waiter.resolve(this.admit(waiter.query, this.waited(waiter)));
    }
  }
}
