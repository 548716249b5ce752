import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { claimFires, READ_BACK_MARGIN_MS, type ClaimOutcome } from '../../src/coordination/claims/table-claims.js';
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
