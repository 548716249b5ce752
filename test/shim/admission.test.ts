import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Admission, type Ticket } from '../../src/shim/admission/admission.js';
import { BatchCollector } from '../../src/shim/admission/batches.js';
import { answerMarginMs, waitBudgetMs } from '../../src/shim/admission/budget.js';
import { FairQueue, type Waiting } from '../../src/shim/admission/fair-queue.js';
import type { Timers } from '../../src/shim/admission/timers.js';

/** Timers a test fires by moving the clock: due ones run in order of their due time. */
class ManualTimers implements Timers {
  private next = 0;
  private readonly due = new Map<number, { at: number; fn: () => void }>();
  constructor(private readonly clock: ManualClock) {}
  /** Timers set (not counting the ends of ticks). */
  armed = 0;
  set(fn: () => void, ms: number): unknown {
    this.armed += 1;
    return this.add(fn, ms);
  }
  private add(fn: () => void, ms: number): number {
    const id = this.next++;
    this.due.set(id, { at: this.clock.monotonicMs() + ms, fn });
    return id;
  }
  clear(handle: unknown): void {
    this.due.delete(handle as number);
  }
  /** The end of the tick: fired by `advance` (0 ms is enough). */
  soon(fn: () => void): void {
    this.add(fn, 0);
  }
  get pending(): number {
    return this.due.size;
  }
  advance(ms: number): void {
    const until = this.clock.monotonicMs() + ms;
    for (;;) {
      const first = [...this.due.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (first === undefined) break;
      this.clock.set(this.clock.nowMs() + Math.max(0, first[1].at - this.clock.monotonicMs()));
      this.due.delete(first[0]);
      first[1].fn();
    }
    this.clock.set(this.clock.nowMs() + Math.max(0, until - this.clock.monotonicMs()));
  }
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(limits = { maxInflight: 2, maxInflightPerQuery: 1, maxQueued: 3 }) {
  const clock = new ManualClock(1_000);
  const timers = new ManualTimers(clock);
  return { clock, timers, admission: new Admission(limits, clock, timers) };
}

/** Tracks a ticket promise: settled value once it resolves. */
function track(p: Promise<Ticket>): { ticket: Ticket | undefined } {
  const box: { ticket: Ticket | undefined } = { ticket: undefined };
  void p.then((t) => (box.ticket = t));
  return box;
}

describe('fair queue', () => {
  it('serves queries round-robin, FIFO within one, skipping waiters that left and queries at their cap', () => {
    const q = new FairQueue<Waiting & { id: string }>();
    const w = (query: string, id: string) => ({ query, id, gone: false });
    const a1 = w('a', 'a1');
    for (const x of [a1, w('a', 'a2'), w('a', 'a3'), w('b', 'b1'), w('c', 'c1'), w('c', 'c2')]) q.push(x);
    q.leave(a1);
    expect(q.size).toBe(5);
    const order: string[] = [];
    for (let x = q.next(() => true); x !== undefined; x = q.next(() => true)) order.push(x.id);
    expect(order).toEqual(['a2', 'b1', 'c1', 'a3', 'c2']);
    q.push(w('a', 'a4'));
    q.push(w('b', 'b2'));
    expect(q.next((query) => query !== 'a')?.id).toBe('b2');
    expect(q.next((query) => query !== 'a')).toBeUndefined();
    expect(q.size).toBe(1);
  });
});

describe('admission', () => {
  it('starts at once under the caps; past them it waits and starts when a slot frees', async () => {
    const { admission } = setup();
    const first = await admission.acquire('a', 100);
    expect(first).toMatchObject({ kind: 'admitted', waitedMs: 0 });
    const second = track(admission.acquire('a', 100));
    await flush();
    expect(second.ticket).toBeUndefined();
    expect(admission.queued).toBe(1);
    if (first.kind === 'admitted') first.release();
    await flush();
    expect(second.ticket).toMatchObject({ kind: 'admitted' });
    expect(admission.inflightOf('a')).toBe(1);
  });

  it('gives up at its wait budget: refused as overload, never started', async () => {
    const { admission, timers } = setup();
    await admission.acquire('a', 100);
    const waiting = track(admission.acquire('a', 100));
    timers.advance(99);
    await flush();
    expect(waiting.ticket).toBeUndefined();
    timers.advance(1);
    await flush();
    expect(waiting.ticket).toEqual({ kind: 'refused', waitedMs: 100, why: 'gave_up' });
    expect(admission.queued).toBe(0);
    expect(timers.pending).toBe(0);
  });

  it('one busy query cannot starve another: a free slot goes round-robin', async () => {
    const { admission } = setup({ maxInflight: 1, maxInflightPerQuery: 1, maxQueued: 10 });
    const held = await admission.acquire('busy', 1_000);
    const busy = [track(admission.acquire('busy', 1_000)), track(admission.acquire('busy', 1_000))];
    const other = track(admission.acquire('other', 1_000));
    if (held.kind === 'admitted') held.release();
    await flush();
    expect(busy[0]?.ticket?.kind).toBe('admitted');
    expect(other.ticket).toBeUndefined();
    const t0 = busy[0]?.ticket;
    if (t0?.kind === 'admitted') t0.release();
    await flush();
    expect(other.ticket?.kind).toBe('admitted');
    expect(busy[1]?.ticket).toBeUndefined();
  });

  it('the per-query cap holds while other queries use the free global slots', async () => {
    const { admission } = setup({ maxInflight: 3, maxInflightPerQuery: 1, maxQueued: 10 });
    await admission.acquire('a', 100);
    const a2 = track(admission.acquire('a', 100));
    const b = track(admission.acquire('b', 100));
    await flush();
    expect(b.ticket?.kind).toBe('admitted');
    expect(a2.ticket).toBeUndefined();
    expect(admission.inflight).toBe(2);
  });

  it('the queue is bounded: past maxQueued a request is refused at once', async () => {
    const { admission } = setup({ maxInflight: 1, maxInflightPerQuery: 1, maxQueued: 2 });
    await admission.acquire('a', 100);
    track(admission.acquire('a', 100));
    track(admission.acquire('b', 100));
    expect(await admission.acquire('c', 100)).toEqual({ kind: 'refused', waitedMs: 0, why: 'queue_full' });
    expect(admission.describe('a')).toBe('1 of at most 1 queries in flight, 1 of at most 1 of this query, 2 of at most 2 waiting');
  });

  it('no budget, no wait: refused at once when it cannot start', async () => {
    const { admission } = setup();
    await admission.acquire('a', 0);
    expect(await admission.acquire('a', 0)).toEqual({ kind: 'refused', waitedMs: 0, why: 'gave_up' });
  });

  it('a release is counted once however often it is called', async () => {
    const { admission } = setup();
    const t = await admission.acquire('a', 0);
    if (t.kind === 'admitted') {
      t.release();
      t.release();
    }
    expect(admission.inflight).toBe(0);
  });
});

describe('wait budget', () => {
  it('leaves a margin inside deadline_ms to answer from the fail-safe path', () => {
    expect(answerMarginMs(2_000)).toBe(50);
    expect(answerMarginMs(200)).toBe(20);
    expect(waitBudgetMs(2_000, 0)).toBe(1_950);
    expect(waitBudgetMs(2_000, 1_960)).toBeLessThan(0);
  });
});

describe('batch collector', () => {
  const policy = { maxSize: 3, windowMs: 10, maxOpenMs: 25 };

  /** A collector whose dispatched batches settle when the test says. */
  function collector() {
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const c = new BatchCollector<string>(clock, timers);
    const sent: string[][] = [];
    const settle: (() => void)[] = [];
    const dispatch = (members: string[]) => {
      sent.push(members);
      return new Promise<void>((resolve) => settle.push(resolve));
    };
    const join = (v: string, p = policy, group = 'g') => c.join(group, v, p, dispatch);
    return { c, timers, sent, settle, join };
  }

  it('a lone key is sent at the end of its tick: no timer, no wait for company', () => {
    const { timers, sent, join } = collector();
    // A window no test would outwait: a lone key never waits on it.
    join('a', { ...policy, windowMs: 60_000, maxOpenMs: 60_000 });
    expect(sent).toEqual([]);
    timers.advance(0);
    expect(sent).toEqual([['a']]);
    expect(timers.armed).toBe(0);
    expect(timers.pending).toBe(0);
  });

  it('one key after another, each after the last settled: each alone, none on a timer', async () => {
    const { timers, sent, settle, join } = collector();
    for (const v of ['a', 'b', 'c']) {
      join(v, { ...policy, windowMs: 60_000 });
      timers.advance(0);
      settle.shift()?.();
      await flush();
      timers.advance(0);
    }
    expect(sent).toEqual([['a'], ['b'], ['c']]);
    expect(timers.armed).toBe(0);
  });

  it('keys of the same tick travel together; groups are separate batches', () => {
    const { timers, sent, join } = collector();
    join('a', { ...policy, windowMs: 0 });
    join('b', { ...policy, windowMs: 0 });
    join('x', { ...policy, windowMs: 0 }, 'h');
    timers.advance(0);
    expect(sent).toEqual([['a', 'b'], ['x']]);
  });

  it('sends a full batch at once', () => {
    const { c, sent, join } = collector();
    for (const v of ['a', 'b', 'c', 'd']) join(v);
    expect(sent).toEqual([['a', 'b', 'c']]);
    expect(c.openBatches).toBe(1);
  });

  it('collects keys while a batch of the group is in flight, sends them at the end of the tick it settles in', async () => {
    const { timers, sent, settle, join } = collector();
    const p = { maxSize: 100, windowMs: 0, maxOpenMs: 1_000 };
    join('a', p);
    timers.advance(0);
    join('b', p);
    join('c', p);
    timers.advance(500);
    expect(sent).toEqual([['a']]);
    settle[0]?.();
    await flush();
    join('d', p); // read in the tick of the settling
    expect(sent).toEqual([['a']]);
    timers.advance(0);
    expect(sent).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('a batch of more than one key lingers windowMs after its last join; one of one key does not', async () => {
    const { timers, sent, settle, join } = collector();
    join('a');
    timers.advance(0);
    join('b'); // in flight: b waits for a
    timers.advance(0);
    expect(sent).toEqual([['a']]);
    settle[0]?.();
    await flush();
    timers.advance(0);
    expect(sent).toEqual([['a'], ['b']]);
    settle[1]?.();
    await flush();
    join('c');
    join('d');
    timers.advance(0);
    timers.advance(9);
    join('e', { ...policy, maxSize: 100 });
    timers.advance(9);
    expect(sent).toEqual([['a'], ['b']]);
    timers.advance(1);
    expect(sent).toEqual([['a'], ['b'], ['c', 'd', 'e']]);
  });

  it('the linger of a batch that waited on a flight counts from the settling, not from a join the flight outlasted', async () => {
    const { timers, sent, settle, join } = collector();
    const p = { maxSize: 500, windowMs: 10, maxOpenMs: 500 };
    join('first', p);
    timers.advance(0);
    for (let i = 0; i < 100; i++) join(`early-${i}`, p);
    // The flight holds the event loop 40 ms (a busy machine): no key is read meanwhile.
    timers.advance(40);
    settle[0]?.();
    await flush();
    timers.advance(0);
    expect(sent).toHaveLength(1);
    // The burst's next keys come in once the loop is free, a few ms apart.
    for (let tick = 0; tick < 6; tick++) {
      for (let i = 0; i < 50; i++) join(`late-${tick}-${i}`, p);
      timers.advance(4);
    }
    expect(sent).toHaveLength(1);
    timers.advance(10);
    expect(sent.map((b) => b.length)).toEqual([1, 400]);
  });

  it('a burst of 1 000 keys over a few ticks while the first is in flight: at most 4 batches, every key sent once', async () => {
    const { timers, sent, settle, join } = collector();
    const p = { maxSize: 500, windowMs: 10, maxOpenMs: 500 };
    const keys = Array.from({ length: 1_000 }, (_, i) => `svc-${i}`);
    join(keys[0] as string, p);
    timers.advance(0);
    // 999 keys in 9 ticks, 3 ms apart; the batches settle 30 ms after they are sent.
    for (let tick = 0; tick < 9; tick++) {
      for (const k of keys.slice(1 + tick * 111, 1 + (tick + 1) * 111)) join(k, p);
      timers.advance(3);
    }
    for (let round = 0; round < 5 && settle.length > 0; round++) {
      timers.advance(30);
      for (const done of settle.splice(0)) done();
      await flush();
      timers.advance(0);
      timers.advance(10);
    }
    expect(sent.length).toBeLessThanOrEqual(4);
    expect(sent.map((b) => b.length)).toEqual([1, 500, 499]);
    expect(sent.flat().sort()).toEqual([...keys].sort());
  });

  it('sends after maxOpenMs even while a batch is in flight and keys keep joining', () => {
    const { c, timers, sent, join } = collector();
    const p = { ...policy, maxSize: 100 };
    join('0', p);
    timers.advance(0);
    for (let i = 1; i < 6; i++) {
      timers.advance(8);
      join(String(i), p);
    }
    expect(sent).toEqual([['0'], ['1', '2', '3', '4']]);
    expect(c.openBatches).toBe(1);
  });
});
