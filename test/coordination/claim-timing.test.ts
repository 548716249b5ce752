import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { claimFires, READ_BACK_MARGIN_MS, tableClaims, type ClaimOutcome } from '../../src/coordination/claims/table-claims.js';
import { Coordinator } from '../../src/coordination/coordinator.js';
import { applySchema } from '../../src/coordination/topology.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * docs/claim-protocol.md: a claim stands only if `ack − free read < settle`
 * (strictly), measured on the MONOTONIC clock, and its read-back waits until
 * `ack + settle + READ_BACK_MARGIN_MS`. The claim runs on the real engine; the
 * injected clock moves between the free read and the acknowledgement.
 */
const SETTLE = 750;
let db: TestDatabase;
let coord: Coordinator;

beforeAll(async () => {
  db = await openTestDatabase('claimtiming');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  coord = new Coordinator(db.handle.client, db.database, { read: {}, write: {} });
});
afterAll(async () => db?.close());

interface Result {
  readonly outcome: ClaimOutcome | undefined;
  readonly slept: number[];
}

/**
 * Claims `huntId` with `during(clock)` applied between the free read and the
 * acknowledgement: the protocol reads the free-read time synchronously when
 * the claim starts, so whatever `during` does to the clock lands in between.
 */
async function claim(huntId: string, during: (clock: ManualClock) => void): Promise<Result> {
  const clock = new ManualClock(Date.now());
  const slept: number[] = [];
  const outcomes = await claimFires(coord, 'me', [{ huntId, fire: 1_000 }], {
    leaseSeconds: 300,
    settleMs: SETTLE,
    clock,
    sleep: async (ms) => {
      slept.push(ms);
      clock.advance(ms);
    },
    claimStart: (fn) => {
      const started = fn();
      during(clock);
      return started;
    },
  });
  return { outcome: outcomes.get(huntId), slept };
}

describe('claim timing at the settle boundary', () => {
  it('an acknowledgement 1 ms inside settle stands; the read-back waits settle + margin after it', async () => {
    const r = await claim('inside', (c) => c.advance(SETTLE - 1));
    expect(r.outcome).toEqual({ kind: 'won', watermark: null });
    expect(r.slept).toEqual([SETTLE + READ_BACK_MARGIN_MS]);
  });

  it('an acknowledgement exactly at settle is late (strict), and nothing is read back', async () => {
    const r = await claim('at', (c) => c.advance(SETTLE));
    expect(r.outcome).toEqual({ kind: 'late' });
    expect(r.slept).toEqual([]);
  });

  it('an acknowledgement after settle is late', async () => {
    const r = await claim('after', (c) => c.advance(SETTLE + 1));
    expect(r.outcome).toEqual({ kind: 'late' });
  });

  it('a wall clock stepped back during the claim does not make a late acknowledgement look in time', async () => {
    const r = await claim('ntp-back', (c) => {
      c.stepWall(-10_000);
      c.advance(SETTLE);
    });
    expect(r.outcome).toEqual({ kind: 'late' });
  });

  it('a wall clock stepped forward does not make an in-time acknowledgement late, nor shorten the wait', async () => {
    const r = await claim('ntp-forward', (c) => {
      c.stepWall(60_000);
      c.advance(10);
    });
    expect(r.outcome).toEqual({ kind: 'won', watermark: null });
    expect(r.slept).toEqual([SETTLE + READ_BACK_MARGIN_MS]);
  });
});

describe('the table protocol as the runner uses it (docs/claim-protocol.md#the-table-protocol)', () => {
  const timing = (clock: ManualClock, during: (c: ManualClock) => void) => ({
    leaseSeconds: 300,
    settleMs: SETTLE,
    clock,
    sleep: async (ms: number) => clock.advance(ms),
    claimStart: <T>(fn: () => Promise<T>) => {
      const started = fn();
      during(clock);
      return started;
    },
  });
  const newest = async (huntId: string) => (await coord.newestLeases([huntId])).rows.get(huntId);
  // A renewal's lease_until comes from the server clock estimate a tick's due query refreshes.
  beforeAll(async () => {
    await coord.tick();
  });

  it('a late claim is released at once: a release row of its fire goes on top (never a delete), so it holds the hunt for no lease', async () => {
    const clock = new ManualClock(Date.now());
    const late = await tableClaims(coord, 'slow', timing(clock, (c) => c.advance(SETTLE))).claim([{ huntId: 'late-release', fire: 1_000 }]);
    expect(late.get('late-release')).toEqual({ kind: 'late' });
    expect(await newest('late-release')).toMatchObject({ owner: 'slow', fire: 1_000, leaseUntil: 0 });
    // Another runner's next claim of the hunt stands at once.
    const next = await tableClaims(coord, 'next', timing(clock, () => undefined)).claim([{ huntId: 'late-release', fire: 1_000 }]);
    expect(next.get('late-release')?.kind).toBe('won');
  });

  it('a late claim whose release fails says so in its outcome: its row holds the hunt until its lease ends', async () => {
    const clock = new ManualClock(Date.now());
    // The release statement (and only it) goes out with an aborted signal: the real client rejects it.
    const client = db.handle.client;
    const failing = new Proxy(client, {
      get(target, key, receiver) {
        if (key !== 'command') return Reflect.get(target, key, receiver) as unknown;
        return (params: Parameters<typeof client.command>[0]) =>
          target.command(params.query.includes('toInt64(0) FROM') ? { ...params, abort_signal: AbortSignal.abort() } : params);
      },
    });
    const slow = tableClaims(coord.withClient(failing), 'slow', timing(clock, (c) => c.advance(SETTLE)));
    const late = (await slow.claim([{ huntId: 'late-unreleased', fire: 1_000 }])).get('late-unreleased');
    expect(late).toMatchObject({ kind: 'late', releaseError: expect.any(Error) });
    expect((await newest('late-unreleased'))?.leaseUntil).toBeGreaterThan(0);
  });

  it('while the newest row’s fire is owed, a claim of a newer fire takes that one (the same window), and is confirmed by a fresh row', async () => {
    const clock = new ManualClock(Date.now());
    const first = await tableClaims(coord, 'first', { ...timing(clock, () => undefined), leaseSeconds: 1 }).claim([{ huntId: 'chain', fire: 1_000 }]);
    expect(first.get('chain')?.kind).toBe('won');
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // its 1 s lease (server clock) is over; nothing ran
    const taker = tableClaims(coord, 'taker', timing(clock, () => undefined));
    const taken = await taker.claim([{ huntId: 'chain', fire: 2_000 }]);
    const won = taken.get('chain');
    expect(won?.kind === 'won' ? won.held.fire : undefined).toBe(1_000);
    expect(await newest('chain')).toMatchObject({ owner: 'taker', fire: 1_000 });
    if (won?.kind !== 'won') throw new Error('taker did not win');
    expect(await taker.holds(won.held)).toBe(true);
    // The first claimant, resuming, sees that it no longer holds the hunt; its renewal writes nothing over the taker.
    const firstWon = first.get('chain');
    if (firstWon?.kind !== 'won') throw new Error('first did not win');
    const stale = tableClaims(coord, 'first', timing(clock, () => undefined));
    expect(await stale.holds(firstWon.held)).toBe(false);
    expect(await stale.renew(firstWon.held)).toBe('lost');
    expect(await newest('chain')).toMatchObject({ owner: 'taker' });
  });
});
