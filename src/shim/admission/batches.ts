import type { Clock } from '../../clock.js';
import { realTimers, type Timers } from './timers.js';

/**
 * Collects the keys of a batched query into batches (docs/catalogue.md#batch),
 * the DataLoader way: a batch never waits alone. Keys of one group (same
 * query, same other params) join the group's open batch, which is sent
 *
 * - when it is full (`maxSize`), at once;
 * - else at the end of the tick it opened in (so keys arriving together
 *   travel together) — unless a batch of the group is in flight: then it
 *   collects until that one settles, and goes at the end of the tick the
 *   settling came in (keys already read in that tick join it);
 * - then, only if it already holds more than one key, it lingers until no key
 *   joined for `windowMs` (0: no linger), counted from its last join or from
 *   the settling it waited for, whichever is later — a burst fills it instead
 *   of splitting into many small queries, also when the event loop was too
 *   busy during the flight to read the burst's next keys; a lone key never
 *   waits on a timer;
 * - and at the latest once it has been open `maxOpenMs`, whatever is in flight.
 *
 * Pure apart from the timers.
 */
export interface BatchPolicy {
  readonly maxSize: number;
  /** Linger of a batch already holding more than one key, after its last join (0: none). */
  readonly windowMs: number;
  readonly maxOpenMs: number;
}

interface OpenBatch<M> {
  readonly members: M[];
  readonly openedMs: number;
  lastJoinMs: number;
  /** Set once the tick it opened in, or the tick a flight of its group settled in, is over. */
  tickOver: boolean;
  policy: BatchPolicy;
  readonly dispatch: (members: M[]) => Promise<unknown>;
  timer: unknown;
}

interface Group<M> {
  open: OpenBatch<M> | undefined;
  /** Batches of this group sent and not yet settled. */
  inflight: number;
  /** When the last of them settled (monotonic ms): the open batch's quiet starts no earlier. */
  settledMs: number;
}

export class BatchCollector<M> {
  private readonly groups = new Map<string, Group<M>>();

  constructor(
    private readonly clock: Clock,
    private readonly timers: Timers = realTimers,
  ) {}

  /** Batches collecting right now. */
  get openBatches(): number {
    let n = 0;
    for (const group of this.groups.values()) if (group.open !== undefined) n += 1;
    return n;
  }

  /**
   * Adds `member` to the open batch of `group`; `dispatch` (of the batch that opens) gets the
   * members when it is sent, and its promise settling tells the group its query is done.
   */
  join(name: string, member: M, policy: BatchPolicy, dispatch: (members: M[]) => Promise<unknown>): void {
    let group = this.groups.get(name);
    if (group === undefined) {
      group = { open: undefined, inflight: 0, settledMs: -Infinity };
      this.groups.set(name, group);
    }
    const now = this.clock.monotonicMs();
    let batch = group.open;
    if (batch === undefined) {
      batch = { members: [], openedMs: now, lastJoinMs: now, tickOver: false, policy, dispatch, timer: undefined };
      group.open = batch;
      const opened = batch;
      const at = group;
      this.timers.soon(() => {
        opened.tickOver = true;
        this.review(name, at, opened);
      });
    }
    batch.members.push(member);
    batch.lastJoinMs = now;
    batch.policy = policy;
    this.review(name, group, batch);
  }

  /** Sends the batch now, or arms the one timer that brings it back here. */
  private review(name: string, group: Group<M>, batch: OpenBatch<M>): void {
    if (group.open !== batch) return;
    if (batch.timer !== undefined) this.timers.clear(batch.timer);
    batch.timer = undefined;
    const { maxSize, windowMs, maxOpenMs } = batch.policy;
    const now = this.clock.monotonicMs();
    const openLeft = maxOpenMs - (now - batch.openedMs);
    if (batch.members.length >= maxSize || openLeft <= 0) return this.send(name, group, batch);
    // A settling batch of the group brings it back (or maxOpenMs does, if none settles in time).
    if (group.inflight > 0) return this.arm(name, group, batch, openLeft);
    // Keys of the same tick first: the end of the tick brings it back, no timer.
    if (!batch.tickOver) return;
    const quietLeft = windowMs - (now - Math.max(batch.lastJoinMs, group.settledMs));
    if (batch.members.length > 1 && quietLeft > 0) return this.arm(name, group, batch, Math.min(quietLeft, openLeft));
    this.send(name, group, batch);
  }

  private arm(name: string, group: Group<M>, batch: OpenBatch<M>, ms: number): void {
    batch.timer = this.timers.set(() => {
      batch.timer = undefined;
      this.review(name, group, batch);
    }, ms);
  }

  private send(name: string, group: Group<M>, batch: OpenBatch<M>): void {
    group.open = undefined;
    group.inflight += 1;
    const settled = () => {
      group.inflight -= 1;
      group.settledMs = this.clock.monotonicMs();
      const next = group.open;
      if (next !== undefined) {
        // Not before the end of this tick: keys whose requests are read in it (they waited while the flight held the loop) join first.
        next.tickOver = false;
        this.timers.soon(() => {
          next.tickOver = true;
          this.review(name, group, next);
        });
      } else if (group.inflight === 0 && this.groups.get(name) === group) this.groups.delete(name);
    };
    batch.dispatch(batch.members).then(settled, settled);
  }
}
