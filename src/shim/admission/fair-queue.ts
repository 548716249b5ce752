/**
 * Waiting requests of the admission queue, pure: one FIFO per catalogue query,
 * served round-robin across queries (docs/failsafe.md#admission), so one busy
 * query cannot starve the others. Bounded by the caller (`size`).
 */
export interface Waiting {
  readonly query: string;
  /** Set when the waiter left (gave up, or was admitted): skipped when met. */
  gone: boolean;
}

class Fifo<T> {
  private items: T[] = [];
  private head = 0;

  push(item: T): void {
    this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  shift(): T | undefined {
    const item = this.items[this.head];
    if (item === undefined) return undefined;
    this.head += 1;
    // Compact now and then, so a long-lived queue does not keep its served prefix.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  get length(): number {
    return this.items.length - this.head;
  }
}

export class FairQueue<W extends Waiting> {
  private readonly byQuery = new Map<string, Fifo<W>>();
  /** Queries with waiters, in the order they are served; `turn` is the next one's index. */
  private order: string[] = [];
  private turn = 0;
  private live = 0;

  /** Waiters that have not left. */
  get size(): number {
    return this.live;
  }

  push(waiter: W): void {
    let fifo = this.byQuery.get(waiter.query);
    if (fifo === undefined) {
      fifo = new Fifo<W>();
      this.byQuery.set(waiter.query, fifo);
      this.order.push(waiter.query);
    }
    fifo.push(waiter);
    this.live += 1;
  }

  /** Marks a waiter gone (it gave up); it is dropped when its turn comes. */
  leave(waiter: W): void {
    if (waiter.gone) return;
    waiter.gone = true;
    this.live -= 1;
  }

  /**
   * The next waiter, round-robin across queries, of a query `canStart` allows
   * (its own cap not reached); it is removed and marked gone. Undefined when none can start.
   */
  next(canStart: (query: string) => boolean): W | undefined {
    for (let tried = 0; tried < this.order.length; ) {
      if (this.turn >= this.order.length) this.turn = 0;
      const query = this.order[this.turn] as string;
      const fifo = this.byQuery.get(query) as Fifo<W>;
      while (fifo.peek()?.gone === true) fifo.shift();
      if (fifo.length === 0) {
        this.byQuery.delete(query);
        this.order.splice(this.turn, 1);
        continue;
      }
      this.turn += 1;
      tried += 1;
      if (!canStart(query)) continue;
      const waiter = fifo.shift() as W;
      waiter.gone = true;
      this.live -= 1;
      return waiter;
    }
    return undefined;
  }
}
