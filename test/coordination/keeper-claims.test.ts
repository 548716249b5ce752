import type { ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { ManualClock } from '../../src/clock.js';
import { forgetRemovedHunts, isKeyConflict, keeperClaims, leaseKey, startKey } from '../../src/coordination/claims/keeper-claims.js';
import { probeAndRecord, readClaimMode, resolveClaimMode } from '../../src/coordination/claims/mode.js';
import type { ClaimOutcome, ClaimProtocol } from '../../src/coordination/claims/protocol.js';
import { Coordinator } from '../../src/coordination/coordinator.js';
import { ServerTime } from '../../src/coordination/server-clock.js';
import { TABLES } from '../../src/coordination/tables.js';
import { applySchema } from '../../src/coordination/topology.js';
import { queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { openKeeperDatabase } from '../helpers/keeper.js';

/**
 * Keeper-mode claims (docs/claim-protocol.md#keeper-mode) on the embedded engine with
 * testkeeper: real KeeperMap keys, real strict-mode inserts, each claimant on its own
 * connection so the inserts race in the engine. Coordination time is an injected clock
 * (bound as {now:Int64}), so lease expiry is driven, not waited for.
 */
let db: TestDatabase;
const extra: ClickHouseHandle[] = [];
const clock = new ManualClock(1_800_000_000_000);

beforeAll(async () => {
  db = await openKeeperDatabase('keeper');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  expect(await probeAndRecord(db.handle.client, db.database, { kind: 'single' })).toEqual({ mode: 'keeper' });
});
afterAll(async () => {
  for (const h of extra) await h.close().catch(() => undefined);
  await db?.close();
});

function coordOn(client: ClickHouseClient): Coordinator {
  return new Coordinator(client, db.database, { read: {}, write: {} }, new ServerTime({ kind: 'clock', clock }, clock));
}

async function claimant(owner: string, leaseSeconds = 60): Promise<ClaimProtocol> {
  const handle = await openClickHouse(db.config);
  extra.push(handle);
  return keeperClaims(coordOn(handle.client), { owner, leaseSeconds });
}

async function keys(huntId: string): Promise<string[]> {
  const rows = await queryRows<{ claim_key: string }>(db, `SELECT claim_key FROM \`${db.database}\`.${TABLES.claim} WHERE hunt_id = {h:String} ORDER BY claim_key`, {
    h: huntId,
  });
  return rows.map((r) => r.claim_key);
}

const won = (o: ClaimOutcome | undefined) => (o?.kind === 'won' ? o : undefined);

describe('Keeper-mode claims', () => {
  it('the mode probe found KeeperMap working and recorded it; an override wins over the record', async () => {
    expect(await readClaimMode(db.handle.client, db.database)).toBe('keeper');
    expect(await resolveClaimMode(db.handle.client, db.database, { kind: 'single' }, 'auto')).toEqual({ mode: 'keeper', source: 'recorded' });
    expect(await resolveClaimMode(db.handle.client, db.database, { kind: 'single' }, 'tables')).toEqual({ mode: 'tables', source: 'override' });
  });

  it('of 8 claimants racing on their own connections, exactly one wins; the rest lose', async () => {
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => claimant(`r${i}`)));
    const outcomes = await Promise.all(all.map((c) => c.claim([{ huntId: 'race', fire: 100 }])));
    const kinds = outcomes.map((o) => o.get('race')?.kind);
    expect(kinds.filter((k) => k === 'won')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'lost')).toHaveLength(7);
    expect(await keys('race')).toEqual(['race', 'race@none']);
  });

  it('a held hunt is not claimed for another fire; after a success the fire stays taken and the next one is claimable', async () => {
    const a = await claimant('a');
    const b = await claimant('b');
    const first = won((await a.claim([{ huntId: 'h1', fire: 10 }])).get('h1'));
    expect(first?.watermark).toBeNull();
    expect((await b.claim([{ huntId: 'h1', fire: 20 }])).get('h1')).toEqual({ kind: 'lost', holder: { owner: 'a' } });
    if (!first) throw new Error('a did not win');
    await coordOn(db.handle.client).setWatermark('h1', 10);
    await a.release(first.held, { succeeded: true });
    // A done window's keys go: nothing per hunt at rest.
    expect(await keys('h1')).toEqual([]);
    // A stale claimant of the fire that just ran loses on the watermark.
    expect((await b.claim([{ huntId: 'h1', fire: 10 }])).get('h1')?.kind).toBe('lost');
    const second = won((await b.claim([{ huntId: 'h1', fire: 20 }])).get('h1'));
    expect(second?.watermark).toBe(10);
    expect(second?.window).toEqual({ startSeconds: 10, endSeconds: 20 });
    if (!second) throw new Error('b did not win');
    await coordOn(db.handle.client).setWatermark('h1', 20);
    await b.release(second.held, { succeeded: true });
    expect(await keys('h1')).toEqual([]);
  });

  it('a failed run releases its lease and keeps its window: a later claim runs that same window, not a newer one', async () => {
    const a = await claimant('a');
    const first = won((await a.claim([{ huntId: 'h2', fire: 10, intervalSeconds: 5 }])).get('h2'));
    if (!first) throw new Error('a did not win');
    expect(first.window).toEqual({ startSeconds: 5, endSeconds: 10 });
    await a.release(first.held, { succeeded: false });
    expect(await keys('h2')).toEqual([startKey('h2', null)]);
    const again = won((await a.claim([{ huntId: 'h2', fire: 20, intervalSeconds: 5 }])).get('h2'));
    expect(again?.held.fire).toBe(10);
    expect(again?.window).toEqual({ startSeconds: 5, endSeconds: 10 });
  });

  it('an expired lease is taken over; a renewed one is not', async () => {
    const crashed = await claimant('crashed', 30);
    const renewing = await claimant('renewing', 30);
    const taker = await claimant('taker', 30);
    const stalled = won((await crashed.claim([{ huntId: 'h3', fire: 10 }])).get('h3'));
    if (!stalled) throw new Error('crashed did not win');
    const kept = won((await renewing.claim([{ huntId: 'h4', fire: 10 }])).get('h4'));
    if (!kept) throw new Error('renewing did not win');
    clock.advance(20_000);
    expect(await renewing.renew(kept.held)).toBe('held');
    clock.advance(20_000); // 40 s: h3's lease (30 s) expired, h4's renewed one runs to 50 s
    const taken = await taker.claim([
      { huntId: 'h3', fire: 10 },
      { huntId: 'h4', fire: 10 },
    ]);
    expect(taken.get('h3')?.kind).toBe('won');
    expect(taken.get('h4')).toEqual({ kind: 'lost', holder: { owner: 'renewing' } });
    const leaseOwner = async () =>
      (await queryRows<{ owner: string }>(db, `SELECT owner FROM \`${db.database}\`.${TABLES.claim} WHERE claim_key = 'h3'`)).map((r) => r.owner);
    expect(await leaseOwner()).toEqual(['taker']);
    // The taker runs the stalled run's window, recorded at its claim: the same one.
    expect(won(taken.get('h3'))?.window).toEqual(stalled.window);
    // The stalled run wakes up: its renewal finds the lease taken over and moves nothing of the taker's.
    expect(await crashed.renew(stalled.held)).toBe('lost');
    expect(await renewing.renew(kept.held)).toBe('held');
    expect(await leaseOwner()).toEqual(['taker']);
    expect(await crashed.holds(stalled.held)).toBe(false);
  });

  it('a start key left without a lease (a lost release) is claimed again for its own window', async () => {
    const a = await claimant('a');
    const first = won((await a.claim([{ huntId: 'h5', fire: 10 }])).get('h5'));
    if (!first) throw new Error('a did not win');
    await db.handle.client.command({
      query: `DELETE FROM \`${db.database}\`.${TABLES.claim} WHERE claim_key = {k:String}`,
      query_params: { k: leaseKey('h5') },
    });
    expect(await keys('h5')).toEqual([startKey('h5', null)]);
    const b = await claimant('b');
    const again = won((await b.claim([{ huntId: 'h5', fire: 30 }])).get('h5'));
    expect(again?.window).toEqual(first.window);
  });

  it('an ambiguous insert (it landed, then the connection failed) is settled by reading the key back', async () => {
    const handle = await openClickHouse(db.config);
    extra.push(handle);
    // The real insert runs on the engine; the caller then sees a socket error, as after a dropped connection.
    const dropping = new Proxy(handle.client, {
      get(target, prop, receiver) {
        if (prop !== 'insert') return Reflect.get(target, prop, receiver) as unknown;
        return async (params: Parameters<ClickHouseClient['insert']>[0]) => {
          await target.insert(params);
          throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
        };
      },
    });
    const unlucky = keeperClaims(coordOn(dropping), { owner: 'unlucky', leaseSeconds: 60 });
    expect((await unlucky.claim([{ huntId: 'h6', fire: 10 }])).get('h6')?.kind).toBe('won');
    // Its insert also "fails" when another holds the key: then the read-back shows their token.
    const other = await claimant('other');
    expect((await other.claim([{ huntId: 'h7', fire: 10 }])).get('h7')?.kind).toBe('won');
    expect((await unlucky.claim([{ huntId: 'h7', fire: 10 }])).get('h7')?.kind).toBe('lost');
  });

  it('a key conflict is told apart from other errors', async () => {
    const a = await claimant('a');
    await a.claim([{ huntId: 'h8', fire: 1 }]);
    const err = await db.handle.client
      .insert({
        table: `${db.database}.${TABLES.claim}`,
        values: [{ claim_key: 'h8', hunt_id: 'h8', fire: 1, owner: 'x', token: 'x', lease_until: 0 }],
        format: 'JSONEachRow',
        clickhouse_settings: { keeper_map_strict_mode: 1 },
      })
      .catch((e: unknown) => e);
    expect(isKeyConflict(err)).toBe(true);
    expect(isKeyConflict(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }))).toBe(false);
  });

  it("a removed hunt's keys go (its records; its lease once expired), a live hunt's stay, and a second pass finds nothing", async () => {
    const a = await claimant('a', 30);
    const coord = coordOn(db.handle.client);
    for (const huntId of ['kept', 'gone']) {
      const claim = won((await a.claim([{ huntId, fire: 10 }])).get(huntId));
      if (!claim) throw new Error(`a did not win ${huntId}`);
      await coord.setWatermark(huntId, 10);
      await a.release(claim.held, { succeeded: true });
    }
    expect((await a.claim([{ huntId: 'gone-crashed', fire: 10 }])).get('gone-crashed')?.kind).toBe('won');
    clock.advance(40_000); // gone-crashed's lease (30 s) has expired
    expect((await a.claim([{ huntId: 'gone-running', fire: 10 }])).get('gone-running')?.kind).toBe('won');

    const now = clock.nowMs() / 1000;
    expect((await a.claim([{ huntId: 'kept', fire: 20 }])).get('kept')?.kind).toBe('won');
    expect(await forgetRemovedHunts(db.handle.client, db.database, ['kept'], now)).toBeGreaterThanOrEqual(3);
    expect(await keys('kept')).toEqual(['kept', startKey('kept', 10)]);
    expect(await keys('gone')).toEqual([]);
    expect(await keys('gone-crashed')).toEqual([]);
    // A run still in flight keeps its lease; its start key goes (the hunt is gone).
    expect(await keys('gone-running')).toEqual(['gone-running']);
    expect(await forgetRemovedHunts(db.handle.client, db.database, ['kept'], now)).toBe(0);
  });
});

describe('a claimant paused past its lease, resuming after another took over (docs/claim-protocol.md#the-invariant)', () => {
  it('runs the same window as the taker, cannot commit, and cannot move the watermark back', async () => {
    const coord = coordOn(db.handle.client);
    await coord.setWatermark('p1', 100);
    const paused = await claimant('paused', 30);
    const taker = await claimant('taker', 30);
    const next = await claimant('next', 30);
    const first = won((await paused.claim([{ huntId: 'p1', fire: 160, intervalSeconds: 60 }])).get('p1'));
    if (!first) throw new Error('paused did not win');
    expect(first.window).toEqual({ startSeconds: 100, endSeconds: 160 });
    clock.advance(40_000); // the paused runner's lease (30 s) expired; a newer fire is due
    const retake = won((await taker.claim([{ huntId: 'p1', fire: 220, intervalSeconds: 60 }])).get('p1'));
    // Not [100, 220): the window from watermark 100 was recorded as [100, 160) by the first claim.
    expect(retake?.window).toEqual({ startSeconds: 100, endSeconds: 160 });
    expect(retake?.held.fire).toBe(160);
    if (!retake) throw new Error('taker did not win');
    await coord.setWatermark('p1', 160);
    await taker.release(retake.held, { succeeded: true });
    const later = won((await next.claim([{ huntId: 'p1', fire: 220, intervalSeconds: 60 }])).get('p1'));
    expect(later?.window).toEqual({ startSeconds: 160, endSeconds: 220 });
    if (!later) throw new Error('next did not win');
    await coord.setWatermark('p1', 220);
    // The paused runner wakes: it no longer holds the hunt, and its commit (were it sent) moves nothing back.
    expect(await paused.holds(first.held)).toBe(false);
    await coord.setWatermark('p1', 160);
    expect((await coord.watermarks(['p1'])).get('p1')).toBe(220);
  });
});

describe('a tick of Keeper claims (docs/claim-protocol.md#keeper-mode)', () => {
  /** `client` with `query`/`insert` replaced where `fails` says so (the real call runs otherwise). */
  async function failing(fails: { query?: (text: string, n: number) => boolean; insert?: (values: unknown) => boolean }): Promise<ClickHouseClient> {
    const handle = await openClickHouse(db.config);
    extra.push(handle);
    let queries = 0;
    return new Proxy(handle.client, {
      get(target, prop, receiver) {
        if (prop === 'query' && fails.query) {
          return async (params: Parameters<ClickHouseClient['query']>[0]) => {
            queries += 1;
            if (fails.query?.(params.query, queries)) throw new Error('socket hang up');
            return target.query(params);
          };
        }
        if (prop === 'insert' && fails.insert) {
          return async (params: Parameters<ClickHouseClient['insert']>[0]) => {
            if (fails.insert?.(params.values)) throw Object.assign(new Error('Limit for keys exceeded'), { type: 'LIMIT_EXCEEDED', code: '290' });
            return target.insert(params);
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
  }

  it('are settled one by one: a claim refused on its own does not take the others with it', async () => {
    const client = await failing({ insert: (values) => JSON.stringify(values).includes('"t-refused"') });
    const claims = keeperClaims(coordOn(client), { owner: 'a', leaseSeconds: 60 });
    const out = await claims.claim([
      { huntId: 't-refused', fire: 10 },
      { huntId: 't-fine', fire: 10 },
    ]);
    expect(out.get('t-refused')?.kind).toBe('failed');
    expect(out.get('t-fine')?.kind).toBe('won');
  });

  it('a batch that fails after its wins releases them: no lease waits a whole lease, the windows stay recorded', async () => {
    // The second watermark read (the one after the wins) fails.
    const client = await failing({ query: (text, n) => text.includes('hunt_watermark') && n > 1 });
    const claims = keeperClaims(coordOn(client), { owner: 'a', leaseSeconds: 60 });
    await expect(claims.claim([{ huntId: 'b-one', fire: 10 }, { huntId: 'b-two', fire: 10 }])).rejects.toThrow(/socket hang up/);
    expect(await keys('b-one')).toEqual([startKey('b-one', null)]);
    expect(await keys('b-two')).toEqual([startKey('b-two', null)]);
    // Claimable again at once, for the same windows.
    const again = await (await claimant('b')).claim([{ huntId: 'b-one', fire: 20 }]);
    expect(won(again.get('b-one'))?.held.fire).toBe(10);
  });
});
