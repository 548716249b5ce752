import type { Clock } from '../../clock.js';
import { realTimers, type Timers } from './timers.js';

/**
 * Collects the keys of a batched query into batches (docs/catalogue.md#batch):
 * keys of one group (same query, same other params) join the group's open
 * batch; it closes when full, when no key joined for `windowMs`, or when it
 * has been open `maxOpenMs` — whichever comes first. Pure apart from the timer.
 */
export interface BatchPolicy {
  readonly maxSize: number;
  readonly windowMs: number;
  readonly maxOpenMs: number;
}

interface OpenBatch<M> {
  readonly members: M[];
  readonly openedMs: number;
  readonly dispatch: (members: M[]) => void;
  timer: unknown;
}

export class BatchCollector<M> {
  private readonly open = new Map<string, OpenBatch<M>>();

  constructor(
    private readonly clock: Clock,
    private readonly timers: Timers = realTimers,
  ) {}

  /** Batches collecting right now. */
  get openBatches(): number {
    return this.open.size;
  }

  /** Adds `member` to the open batch of `group`; `dispatch` (of the batch that opens) gets the members when it closes. */
  join(group: string, member: M, policy: BatchPolicy, dispatch: (members: M[]) => void): void {
    let batch = this.open.get(group);
    if (batch === undefined) {
      batch = { members: [], openedMs: this.clock.monotonicMs(), dispatch, timer: undefined };
      this.open.set(group, batch);
    }
    batch.members.push(member);
    if (batch.timer !== undefined) this.timers.clear(batch.timer);
    if (batch.members.length >= policy.maxSize) return this.close(group, batch);
    const openFor = this.clock.monotonicMs() - batch.openedMs;
    const wait = Math.max(0, Math.min(policy.windowMs, policy.maxOpenMs - openFor));
    const closing = batch;
    batch.timer = this.timers.set(() => this.close(group, closing), wait);
  }

  private close(group: string, batch: OpenBatch<M>): void {
    if (this.open.get(group) !== batch) return;
    this.open.delete(group);
    if (batch.timer !== undefined) this.timers.clear(batch.timer);
    batch.dispatch(batch.members);
  }
}
