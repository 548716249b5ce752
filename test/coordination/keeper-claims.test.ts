import type { ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { ManualClock } from '../../src/clock.js';
import { forgetRemovedHunts, isKeyConflict, keeperClaims, leaseKey, recordKey } from '../../src/coordination/claims/keeper-claims.js';
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
    expect(await keys('race')).toEqual(['race', 'race/100']);
  });

  it('a held hunt is not claimed for another fire; after a success the fire stays taken and the next one is claimable', async () => {
    const a = await claimant('a');
    const b = await claimant('b');
    const first = won((await a.claim([{ huntId: 'h1', fire: 10 }])).get('h1'));
    expect(first?.watermark).toBeNull();
    expect((await b.claim([{ huntId: 'h1', fire: 20 }])).get('h1')).toEqual({ kind: 'lost', holder: { owner: 'a' } });
    if (!first) throw new Error('a did not win');
    await coordOn(db.handle.client).setWatermark('h1', 10);
    await a.release(first.held, { succeeded: true, previousFire: null });
    expect(await keys('h1')).toEqual(['h1/10']);
    // A stale claimant of the fire that just ran loses on its record.
    expect((await b.claim([{ huntId: 'h1', fire: 10 }])).get('h1')?.kind).toBe('lost');
    const second = won((await b.claim([{ huntId: 'h1', fire: 20 }])).get('h1'));
    expect(second?.watermark).toBe(10);
    if (!second) throw new Error('b did not win');
    await coordOn(db.handle.client).setWatermark('h1', 20);
    await b.release(second.held, { succeeded: true, previousFire: 10 });
    // The previous fire's record is gone: one key per hunt at rest.
    expect(await keys('h1')).toEqual(['h1/20']);
  });

  it('a failed run releases both keys: the fire stays owed and is claimed again', async () => {
    const a = await claimant('a');
    const first = won((await a.claim([{ huntId: 'h2', fire: 10 }])).get('h2'));
    if (!first) throw new Error('a did not win');
    await a.release(first.held, { succeeded: false, previousFire: null });
    expect(await keys('h2')).toEqual([]);
    expect((await a.claim([{ huntId: 'h2', fire: 10 }])).get('h2')?.kind).toBe('won');
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
    const rows = await queryRows<{ owner: string }>(db, `SELECT DISTINCT owner FROM \`${db.database}\`.${TABLES.claim} WHERE hunt_id = 'h3'`);
    expect(rows.map((r) => r.owner)).toEqual(['taker']);
    // The stalled run wakes up: its renewal finds the lease taken over and moves nothing of the taker's.
    expect(await crashed.renew(stalled.held)).toBe('lost');
    expect(await renewing.renew(kept.held)).toBe('held');
    const after = await queryRows<{ owner: string }>(db, `SELECT DISTINCT owner FROM \`${db.database}\`.${TABLES.claim} WHERE hunt_id = 'h3'`);
    expect(after.map((r) => r.owner)).toEqual(['taker']);
  });

  it('a record left without a lease and without a watermark (a failed release) is cleaned up and claimed', async () => {
    const a = await claimant('a');
    const first = won((await a.claim([{ huntId: 'h5', fire: 10 }])).get('h5'));
    if (!first) throw new Error('a did not win');
    await db.handle.client.command({
      query: `DELETE FROM \`${db.database}\`.${TABLES.claim} WHERE claim_key = {k:String}`,
      query_params: { k: leaseKey('h5') },
    });
    expect(await keys('h5')).toEqual([recordKey('h5', 10)]);
    const b = await claimant('b');
    expect((await b.claim([{ huntId: 'h5', fire: 10 }])).get('h5')?.kind).toBe('won');
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
      await a.release(claim.held, { succeeded: true, previousFire: null });
    }
    expect((await a.claim([{ huntId: 'gone-crashed', fire: 10 }])).get('gone-crashed')?.kind).toBe('won');
    clock.advance(40_000); // gone-crashed's lease (30 s) has expired
    expect((await a.claim([{ huntId: 'gone-running', fire: 10 }])).get('gone-running')?.kind).toBe('won');

    const now = clock.nowMs() / 1000;
    expect(await forgetRemovedHunts(db.handle.client, db.database, ['kept'], now)).toBeGreaterThanOrEqual(4);
    expect(await keys('kept')).toEqual(['kept/10']);
    expect(await keys('gone')).toEqual([]);
    expect(await keys('gone-crashed')).toEqual([]);
    // A run still in flight keeps its lease; its fire record goes (the watermark still guards the fire).
    expect(await keys('gone-running')).toEqual(['gone-running']);
    expect(await forgetRemovedHunts(db.handle.client, db.database, ['kept'], now)).toBe(0);
  });
});
