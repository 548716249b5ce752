import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { tableClaims } from '../../src/coordination/claims/table-claims.js';
import type { ClaimOutcome, ClaimProtocol, HeldClaim } from '../../src/coordination/claims/protocol.js';
import { Coordinator } from '../../src/coordination/coordinator.js';
import { ServerTime } from '../../src/coordination/server-clock.js';
import { applySchema } from '../../src/coordination/topology.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * The table protocol's writes after a claim are conditional in the statement that writes them
 * (docs/claim-protocol.md#the-window-chain-in-the-table-protocol). The nemesis once found two
 * different windows from one start, (706, 709] and (706, 711]: a runner paused past its lease
 * came back after the link had moved on and put a row of its old fire on top — a failed run's
 * release, or a renewal that looked before it wrote — so the hunt looked free while the taker ran
 * and the chain no longer named the taker's fire. Replayed here step by step on the real engine,
 * with the coordination clock injected (clock mode).
 */
const LEASE = 5;
const SETTLE = 750;
let db: TestDatabase;

beforeAll(async () => {
  db = await openTestDatabase('stalewrites');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterAll(async () => db?.close());

/** `late`: every claim's insert is acknowledged a whole settle after its free read. */
function runner(owner: string, clock: ManualClock, late = false): { claims: ClaimProtocol; coord: Coordinator } {
  const coord = new Coordinator(db.handle.client, db.database, { read: {}, write: {} }, new ServerTime({ kind: 'clock', clock }, clock));
  const claims = tableClaims(coord, owner, {
    leaseSeconds: LEASE,
    settleMs: SETTLE,
    clock,
    sleep: async (ms) => void clock.advance(ms),
    ...(late
      ? {
          claimStart: <T>(fn: () => Promise<T>) => {
            const started = fn(); // the free read's time is taken synchronously
            clock.advance(SETTLE);
            return started;
          },
        }
      : {}),
  });
  return { claims, coord };
}

function won(outcome: ClaimOutcome | undefined): HeldClaim {
  if (outcome?.kind !== 'won') throw new Error(`expected a won claim, got ${JSON.stringify(outcome)}`);
  return outcome.held;
}

const newest = async (huntId: string) =>
  (
    await queryRows<{ owner: string; fire: number | string; lease_until: number | string }>(
      db,
      `SELECT owner, fire, lease_until FROM \`${db.database}\`.hunt_lease WHERE hunt_id = {h:String} ORDER BY claimed DESC, owner ASC LIMIT 1`,
      { h: huntId },
    )
  ).map((r) => ({ owner: r.owner, fire: Number(r.fire), live: Number(r.lease_until) > 0 }))[0];

describe('a stale runner writes nothing over the hunt it lost (table protocol)', () => {
  it('replays the nemesis double: a stale release and renewal after the link moved on leave the taker on top and the chain intact', async () => {
    const hunt = 'v007';
    const clock = new ManualClock(1_796_397_700_000);
    const a = runner('a', clock);
    const b = runner('b', clock);
    const c = runner('c', clock);
    const d = runner('d', clock);
    await a.coord.setWatermark(hunt, 1_796_397_706);

    // A wins fire 709 from watermark 706, then stalls past its lease.
    const aHeld = won((await a.claims.claim([{ huntId: hunt, fire: 1_796_397_709 }])).get(hunt));
    expect(aHeld.fire).toBe(1_796_397_709);
    clock.advance((LEASE + 1) * 1000);
    // B takes over: the chain makes it retake A's window, whatever it planned; it runs and commits.
    const bHeld = won((await b.claims.claim([{ huntId: hunt, fire: 1_796_397_711 }])).get(hunt));
    expect(bHeld.fire).toBe(1_796_397_709);
    await b.coord.setWatermark(hunt, bHeld.fire);
    await b.claims.release(bHeld, { succeeded: true });
    // C starts the next link, (709, 711], and is running it.
    const cHeld = won((await c.claims.claim([{ huntId: hunt, fire: 1_796_397_711 }])).get(hunt));
    expect(cHeld.fire).toBe(1_796_397_711);

    // A wakes: its renewal finds the hunt lost, its failed run's release writes nothing.
    expect(await a.claims.renew(aHeld)).toBe('lost');
    expect(await a.claims.holds(aHeld)).toBe(false);
    await a.claims.release(aHeld, { succeeded: false });
    expect(await newest(hunt)).toEqual({ owner: 'c', fire: 1_796_397_711, live: true });

    // So D, planning a newer fire, finds C's live lease; once C's lease is over, D retakes C's window.
    expect((await d.claims.claim([{ huntId: hunt, fire: 1_796_397_714 }])).get(hunt)?.kind).toBe('lost');
    clock.advance((LEASE + 1) * 1000);
    const dHeld = won((await d.claims.claim([{ huntId: hunt, fire: 1_796_397_714 }])).get(hunt));
    expect(dHeld.fire).toBe(cHeld.fire);
    // C, taken over in turn, cannot renew over D either.
    expect(await c.claims.renew(cHeld)).toBe('lost');
    expect(await newest(hunt)).toEqual({ owner: 'd', fire: 1_796_397_711, live: true });
  });

  it('a holder renews and releases its own row', async () => {
    const hunt = 'own';
    const clock = new ManualClock(1_796_397_700_000);
    const a = runner('a', clock);
    const held = won((await a.claims.claim([{ huntId: hunt, fire: 1_796_397_760 }])).get(hunt));
    clock.advance(2_000);
    expect(await a.claims.renew(held)).toBe('held');
    await a.claims.release(held, { succeeded: true });
    expect(await newest(hunt)).toEqual({ owner: 'a', fire: 1_796_397_760, live: false });
  });

  it('a late retake, a merge, and the next claim: the late row is released, not deleted, so the chain keeps the paused run’s fire', async () => {
    const hunt = 'merged';
    const clock = new ManualClock(1_796_397_700_000);
    const a = runner('a', clock);
    await a.coord.setWatermark(hunt, 1_796_397_706);
    const aHeld = won((await a.claims.claim([{ huntId: hunt, fire: 1_796_397_709 }])).get(hunt));
    clock.advance((LEASE + 1) * 1000); // A is paused past its lease, mid-run
    // B retakes A's fire, but late; then the table merges (only the newest row per hunt stays).
    expect((await runner('b', clock, true).claims.claim([{ huntId: hunt, fire: 1_796_397_711 }])).get(hunt)).toEqual({ kind: 'late' });
    await db.handle.client.command({ query: `OPTIMIZE TABLE \`${db.database}\`.hunt_lease FINAL` });
    expect(await newest(hunt)).toEqual({ owner: 'b', fire: aHeld.fire, live: false });
    // C, planning a newer fire, still runs A's window: the same window, never (706, 711].
    const cHeld = won((await runner('c', clock).claims.claim([{ huntId: hunt, fire: 1_796_397_711 }])).get(hunt));
    expect(cHeld.fire).toBe(aHeld.fire);
  });
});
