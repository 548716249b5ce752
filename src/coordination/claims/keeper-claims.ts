import { randomBytes } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import { DfeError } from '../../errors.js';
import type { Coordinator } from '../coordinator.js';
import { TABLES } from '../tables.js';
import type { ClaimOutcome, ClaimProtocol, ClaimRequest, HeldClaim } from './protocol.js';

/**
 * Keeper mode (docs/claim-protocol.md#keeper-mode). Per hunt, in the KeeperMap table
 * `hunt_claim` ('/' and '@' never appear in a hunt id, a file stem):
 *
 * - the lease key `<hunt>`: one run at a time (progress only, never safety);
 * - the start key `<hunt>@<start>` (`<hunt>@none` before the first watermark): the window
 *   that starts at that watermark, `[start, end)`, fixed by the first claim from it. Its
 *   `fire` column is the window's end and its `lease_until` column the window's start
 *   (KeeperMap's columns are fixed at creation). Every later claim from that start runs
 *   the same window, so two runs of one window are duplicates the dedup token removes,
 *   and windows of different starts never overlap: the safety of the mode rests on
 *   Keeper's create-once insert, not on time.
 *
 * A claim is ONE strict-mode insert of both keys (both or neither). Every later write of
 * the lease is conditional on the claim's random token. No settle wait and no gate: the
 * insert is plain data, so claims on separate connections run in parallel.
 */
const STRICT = Object.freeze({ keeper_map_strict_mode: 1 as const, log_comment: '', insert_deduplication_token: '' });

export const leaseKey = (huntId: string): string => huntId;
/** The start key of the window that starts at `watermark` (null: no watermark yet). */
export const startKey = (huntId: string, watermark: number | null): string => `${huntId}@${watermark ?? 'none'}`;

/**
 * ClickHouse's error type (`KEEPER_EXCEPTION`, `LIMIT_EXCEEDED`…), or undefined for
 * anything else (a socket error). Read by shape, not `instanceof ClickHouseError`:
 * the embedded engine's connection throws the class of its own copy of the client.
 */
function clickHouseType(err: unknown): string | undefined {
  const type = (err as { type?: unknown } | null)?.type;
  return err instanceof Error && typeof type === 'string' && type !== '' ? type : undefined;
}

/** Keeper refused the insert because a key exists: a definite "lost", nothing was written. */
export function isKeyConflict(err: unknown): boolean {
  return clickHouseType(err) === 'KEEPER_EXCEPTION' && /node exists/i.test((err as Error).message);
}

/** Refused by ClickHouse outright (the keys limit, a bad value): nothing was written, so it is not ambiguous. */
function isDefiniteRefusal(err: unknown): boolean {
  const type = clickHouseType(err);
  return type !== undefined && type !== 'KEEPER_EXCEPTION';
}

interface KeyRow {
  claim_key: string;
  fire: number | string;
  owner: string;
  token: string;
  lease_until: number | string;
  now_s: number | string;
}

export interface KeeperClaimOptions {
  readonly owner: string;
  readonly leaseSeconds: number;
  /** A fresh token per claim attempt (tests may pin it). */
  readonly newToken?: () => string;
}

type Won = Extract<ClaimOutcome, { kind: 'won' }>;

export function keeperClaims(coord: Coordinator, options: KeeperClaimOptions): ClaimProtocol {
  const { owner, leaseSeconds } = options;
  const newToken = options.newToken ?? (() => randomBytes(12).toString('hex'));
  const client: ClickHouseClient = coord.client;
  const table = qualifiedTable(coord.database, TABLES.claim);
  const columns: [string, ...string[]] = ['claim_key', 'hunt_id', 'fire', 'owner', 'token', 'lease_until'];

  const leaseUntil = (): number => {
    const now = coord.time.nowSeconds();
    if (now === undefined) throw new DfeError('CLICKHOUSE_FAILED', 'no ClickHouse clock reading yet');
    return now + leaseSeconds;
  };

  const insert = async (values: ReadonlyArray<Record<string, unknown>>): Promise<void> => {
    await client.insert({ table, values: [...values], columns, format: 'JSONEachRow', clickhouse_settings: STRICT, ...coord.abort });
  };

  const readKeys = async (keys: readonly string[]): Promise<Map<string, KeyRow>> => {
    const rs = await client.query({
      query: `SELECT claim_key, fire, owner, token, lease_until, ${coord.now} AS now_s FROM ${table} WHERE claim_key IN {keys:Array(String)}`,
      query_params: coord.params({ keys }),
      format: 'JSONEachRow',
      ...coord.abort,
    });
    return new Map((await rs.json<KeyRow>()).map((k) => [k.claim_key, k]));
  };

  const command = async (query: string, values: Record<string, unknown>): Promise<void> => {
    await client.command({ query, query_params: coord.params(values), clickhouse_settings: STRICT, ...coord.abort });
  };

  const leaseRow = (huntId: string, fire: number, token: string) => ({ claim_key: leaseKey(huntId), hunt_id: huntId, fire, owner, token, lease_until: leaseUntil() });

  /**
   * Inserts `rows` (the lease alone, or the lease and a new start key): won, lost on a
   * conflict, or, when the outcome is unknown (a dropped connection), won iff the lease
   * key carries our token.
   */
  const tryInsert = async (rows: ReadonlyArray<Record<string, unknown>>, token: string, won: Won): Promise<ClaimOutcome | 'conflict'> => {
    try {
      await insert(rows);
      return won;
    } catch (err) {
      if (coord.aborted) throw err;
      if (isKeyConflict(err)) return 'conflict';
      if (isDefiniteRefusal(err)) throw err;
      const back = (await readKeys([leaseKey(won.held.huntId)])).get(leaseKey(won.held.huntId));
      if (back?.token === token) return won;
      return { kind: 'lost', holder: back ? { owner: back.owner } : undefined };
    }
  };

  /** Deletes an expired lease, only if still the same claim and still expired (one key per statement: docs/claim-protocol.md). */
  const deleteExpiredLease = async (huntId: string, token: string): Promise<void> => {
    await command(`DELETE FROM ${table} WHERE claim_key = {key:String} AND token = {token:String} AND lease_until <= ${coord.now}`, { key: leaseKey(huntId), token });
  };

  /**
   * One hunt's claim from the watermark `wm` read just before: the window starting at `wm`
   * is the recorded one if its start key exists (a retake: the same window, perhaps an
   * earlier fire than requested), else `[wm, fire)`, recorded by this claim.
   */
  const claimOne = async (r: ClaimRequest, wm: number | null): Promise<ClaimOutcome> => {
    const { huntId } = r;
    const skey = startKey(huntId, wm);
    const start = wm ?? r.fire - (r.intervalSeconds ?? 0);
    if (wm !== null && wm >= r.fire) return { kind: 'lost', holder: undefined }; // a stale due row: the fire ran
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const token = newToken();
      const fresh: Won = { kind: 'won', watermark: wm, held: { huntId, fire: r.fire, token, startKey: skey }, window: { startSeconds: start, endSeconds: r.fire } };
      const startRow = { ...leaseRow(huntId, r.fire, token), claim_key: skey, lease_until: start };
      const first = await tryInsert([leaseRow(huntId, r.fire, token), startRow], token, fresh);
      if (first !== 'conflict') return first;
      const keys = await readKeys([leaseKey(huntId), skey]);
      const lease = keys.get(leaseKey(huntId));
      if (lease && Number(lease.lease_until) > Number(lease.now_s)) return { kind: 'lost', holder: { owner: lease.owner } };
      if (lease) await deleteExpiredLease(huntId, lease.token);
      const recorded = keys.get(skey);
      if (!recorded) continue; // only an expired lease stood in the way: the whole insert once more
      // The window from this start was claimed before (a failed, crashed or paused run): run the same one.
      const end = Number(recorded.fire);
      const retake: Won = { kind: 'won', watermark: wm, held: { huntId, fire: end, token, startKey: skey }, window: { startSeconds: Number(recorded.lease_until), endSeconds: end } };
      const taken = await tryInsert([leaseRow(huntId, end, token)], token, retake);
      return taken === 'conflict' ? { kind: 'lost', holder: undefined } : taken;
    }
    return { kind: 'lost', holder: undefined };
  };

  /**
   * The hunt_lease row of a Keeper claim: never read by a claim, only by the due query
   * (a held hunt is not due, so the shim's backlog and the other runners' ticks skip
   * it). Plain data; a failed write only costs a claim that loses in Keeper, or (release)
   * a hunt that looks held until its lease ends.
   */
  const mirror = async (held: HeldClaim, lease: number | 'release'): Promise<void> => {
    await coord.putLease(held.huntId, owner, held.fire, lease).catch(() => undefined);
  };

  const release = async (held: HeldClaim, result: { succeeded: boolean }): Promise<void> => {
    // A done window's start key goes (a stale claim from that start meets the watermark
    // after its win); a failed run's stays, so the window stays owed exactly as recorded.
    if (result.succeeded && held.startKey) await command(`DELETE FROM ${table} WHERE claim_key = {key:String}`, { key: held.startKey });
    await command(`DELETE FROM ${table} WHERE claim_key = {key:String} AND token = {token:String}`, { key: leaseKey(held.huntId), token: held.token });
    await mirror(held, 'release');
  };

  const holds = async (held: HeldClaim): Promise<boolean> => (await readKeys([leaseKey(held.huntId)])).get(leaseKey(held.huntId))?.token === held.token;

  return {
    mode: 'keeper',
    async claim(requests) {
      const outcomes = new Map<string, ClaimOutcome>();
      if (requests.length === 0) return outcomes;
      const before = await coord.watermarks(requests.map((r) => r.huntId));
      // Settled one by one: a claim that fails does not take the others with it.
      const settled = await Promise.allSettled(requests.map((r) => claimOne(r, before.get(r.huntId) ?? null)));
      const won: Won[] = [];
      settled.forEach((s, k) => {
        const r = requests[k] as ClaimRequest;
        if (s.status === 'fulfilled') {
          outcomes.set(r.huntId, s.value);
          if (s.value.kind === 'won') won.push(s.value);
        } else {
          outcomes.set(r.huntId, { kind: 'failed', error: s.reason });
        }
      });
      if (won.length === 0) return outcomes;
      await Promise.all(won.map((o) => mirror(o.held, leaseSeconds)));
      try {
        // The watermark, read after the win: a start older than it is a stale claim (the window ran).
        const marks = await coord.watermarks(won.map((o) => o.held.huntId));
        for (const o of won) outcomes.set(o.held.huntId, { ...o, watermark: marks.get(o.held.huntId) ?? null });
      } catch (err) {
        // The batch cannot finish: release what it won, so no key waits a whole lease.
        await Promise.allSettled(won.map((o) => release(o.held, { succeeded: false })));
        throw err;
      }
      return outcomes;
    },
    async renew(held) {
      const lease = leaseKey(held.huntId);
      await command(`ALTER TABLE ${table} UPDATE lease_until = {until:Int64} WHERE claim_key = {key:String} AND token = {token:String}`, {
        until: leaseUntil(),
        key: lease,
        token: held.token,
      });
      // The update is conditional on our token and says nothing of what it matched: read the
      // lease back. Gone or another token: an expired lease was taken over (docs/claim-protocol.md).
      if (!(await holds(held))) return 'lost';
      await mirror(held, leaseSeconds);
      return 'held';
    },
    holds,
    release,
    on: (other) => keeperClaims(coord.withClient(other), options),
  };
}

/**
 * Deletes the Keeper keys of hunts no longer live (removed from the hunts directory, so
 * tombstoned by materialise): every fire record, and a lease only once it has expired (a run
 * still in flight keeps it). Without this each removed hunt leaves its last fire record for
 * good, and `keys_limit` counts it. A record's loss is safe: a stale claim of a fire that ran
 * still meets the watermark. Nothing when the table does not exist (table-protocol mode).
 * `nowSeconds`: coordination time, for tests; default the server's `now()`. Returns the count.
 */
export async function forgetRemovedHunts(
  client: ClickHouseClient,
  database: string,
  live: readonly string[],
  nowSeconds?: number,
): Promise<number> {
  const exists = await client.query({
    query: 'SELECT count() AS n FROM system.tables WHERE database = {db:String} AND name = {name:String}',
    query_params: { db: database, name: TABLES.claim },
    format: 'JSONEachRow',
  });
  if (Number((await exists.json<{ n: number | string }>())[0]?.n ?? 0) === 0) return 0;
  const table = qualifiedTable(database, TABLES.claim);
  const now = nowSeconds === undefined ? 'toUnixTimestamp(now())' : '{now:Int64}';
  const where = `hunt_id NOT IN {live:Array(String)} AND (claim_key != hunt_id OR lease_until <= ${now})`;
  const params = { live: [...live], ...(nowSeconds === undefined ? {} : { now: nowSeconds }) };
  // As the claims' own statements: Keeper is the one copy, so no replica or quorum settings.
  const counted = await client.query({ query: `SELECT count() AS n FROM ${table} WHERE ${where}`, query_params: params, format: 'JSONEachRow' });
  const n = Number((await counted.json<{ n: number | string }>())[0]?.n ?? 0);
  if (n > 0) await client.command({ query: `DELETE FROM ${table} WHERE ${where}`, query_params: params });
  return n;
}
