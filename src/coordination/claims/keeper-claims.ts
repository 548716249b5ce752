import { randomBytes } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import { DfeError } from '../../errors.js';
import type { Coordinator } from '../coordinator.js';
import { TABLES } from '../tables.js';
import type { ClaimOutcome, ClaimProtocol, ClaimRequest, HeldClaim } from './protocol.js';

/**
 * Keeper mode (docs/claim-protocol.md#keeper-mode): per hunt, a lease key `<hunt>`
 * and a record key `<hunt>/<fire>` in the KeeperMap table `hunt_claim` ('/' never
 * appears in a hunt id, a file stem). A claim is ONE strict-mode insert of both
 * keys: Keeper creates both or neither, and of racing inserts exactly one
 * succeeds. Every later write is conditional on the claim's random token. No
 * settle wait and no gate: the insert is plain data, so claims on separate
 * connections run in parallel even on the embedded engine.
 */
const STRICT = Object.freeze({ keeper_map_strict_mode: 1 as const, log_comment: '', insert_deduplication_token: '' });

export const leaseKey = (huntId: string): string => huntId;
export const recordKey = (huntId: string, fire: number): string => `${huntId}/${fire}`;

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

export function keeperClaims(coord: Coordinator, options: KeeperClaimOptions): ClaimProtocol {
  const { owner, leaseSeconds } = options;
  const newToken = options.newToken ?? (() => randomBytes(12).toString('hex'));
  const client: ClickHouseClient = coord.client;
  const table = qualifiedTable(coord.database, TABLES.claim);

  const leaseUntil = (): number => {
    const now = coord.time.nowSeconds();
    if (now === undefined) throw new DfeError('CLICKHOUSE_FAILED', 'no ClickHouse clock reading yet');
    return now + leaseSeconds;
  };

  const insertKeys = async (r: ClaimRequest, token: string): Promise<void> => {
    const row = { hunt_id: r.huntId, fire: r.fire, owner, token, lease_until: leaseUntil() };
    await client.insert({
      table,
      values: [
        { claim_key: leaseKey(r.huntId), ...row },
        { claim_key: recordKey(r.huntId, r.fire), ...row },
      ],
      columns: ['claim_key', 'hunt_id', 'fire', 'owner', 'token', 'lease_until'],
      format: 'JSONEachRow',
      clickhouse_settings: STRICT,
      ...coord.abort,
    });
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

  /** After a conflict: 'lost', or 'retry' once a stale key (expired lease, failed run's record) is deleted. */
  const afterConflict = async (r: ClaimRequest): Promise<'retry' | ClaimOutcome> => {
    const lease = leaseKey(r.huntId);
    const record = recordKey(r.huntId, r.fire);
    const keys = await readKeys([lease, record]);
    const held = keys.get(lease);
    const rec = keys.get(record);
    if (held) {
      if (Number(held.lease_until) > Number(held.now_s)) return { kind: 'lost', holder: { owner: held.owner } };
      // An expired lease: delete it, then its fire's record, only if still the same claim and still
      // expired. One key per statement: a KeeperMap DELETE whose multi-key write meets a key already
      // gone retries the rest WITHOUT the version check (docs/claim-protocol.md#keeper-mode).
      const expired = `AND token = {token:String} AND lease_until <= ${coord.now}`;
      await command(`DELETE FROM ${table} WHERE claim_key = {key:String} ${expired}`, { key: lease, token: held.token });
      await command(`DELETE FROM ${table} WHERE claim_key = {key:String} ${expired}`, { key: recordKey(r.huntId, Number(held.fire)), token: held.token });
      return 'retry';
    }
    if (!rec) return 'retry'; // both keys went away in between: try again
    // Read AFTER the keys: a run writes its watermark before it deletes its lease, so a lease
    // seen gone means the watermark read now shows that run's fire.
    const watermark = (await coord.watermarks([r.huntId])).get(r.huntId);
    if (watermark !== undefined && watermark >= r.fire) return { kind: 'lost', holder: { owner: rec.owner } };
    // A record without a lease and without the watermark: a failed or crashed run's leftover.
    await command(`DELETE FROM ${table} WHERE claim_key = {key:String} AND token = {token:String}`, { key: record, token: rec.token });
    return 'retry';
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

  const claimOne = async (r: ClaimRequest): Promise<ClaimOutcome> => {
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const token = newToken();
      const held: HeldClaim = { huntId: r.huntId, fire: r.fire, token };
      try {
        await insertKeys(r, token);
        return { kind: 'won', watermark: null, held };
      } catch (err) {
        if (coord.aborted) throw err;
        if (!isKeyConflict(err)) {
          if (isDefiniteRefusal(err)) throw err;
          // Ambiguous: the insert may have landed. Our token on the lease key settles it.
          const back = (await readKeys([leaseKey(r.huntId)])).get(leaseKey(r.huntId));
          if (back?.token === token) return { kind: 'won', watermark: null, held };
          return { kind: 'lost', holder: back ? { owner: back.owner } : undefined };
        }
        const next = attempt === 0 ? await afterConflict(r) : undefined;
        if (next === undefined) break;
        if (next !== 'retry') return next;
      }
    }
    return { kind: 'lost', holder: undefined };
  };

  return {
    mode: 'keeper',
    async claim(requests) {
      const settled = await Promise.all(requests.map(async (r) => [r.huntId, await claimOne(r)] as const));
      const outcomes = new Map<string, ClaimOutcome>(settled);
      const won = settled.filter(([, o]) => o.kind === 'won').map(([h]) => h);
      await Promise.all(settled.map(([, o]) => (o.kind === 'won' ? mirror(o.held, leaseSeconds) : undefined)));
      if (won.length > 0) {
        // The watermark, read after the win: the already-run recheck and the window start.
        const marks = await coord.watermarks(won);
        for (const huntId of won) {
          const o = outcomes.get(huntId);
          if (o?.kind === 'won') outcomes.set(huntId, { ...o, watermark: marks.get(huntId) ?? null });
        }
      }
      return outcomes;
    },
    async renew(held) {
      const lease = leaseKey(held.huntId);
      await command(
        `ALTER TABLE ${table} UPDATE lease_until = {until:Int64} WHERE claim_key IN {keys:Array(String)} AND token = {token:String}`,
        { until: leaseUntil(), keys: [lease, recordKey(held.huntId, held.fire)], token: held.token },
      );
      // The update is conditional on our token and says nothing of what it matched: read the
      // lease back. Gone or another token: an expired lease was taken over (docs/claim-protocol.md).
      if ((await readKeys([lease])).get(lease)?.token !== held.token) return 'lost';
      await mirror(held, leaseSeconds);
      return 'held';
    },
    async release(held, result) {
      if (result.succeeded) {
        // The fire's record stays (a stale claim of it loses); the previous fire's record goes.
        const previous = result.previousFire === null ? [] : [recordKey(held.huntId, result.previousFire)];
        await command(
          `DELETE FROM ${table} WHERE claim_key IN {previous:Array(String)} OR (claim_key = {lease:String} AND token = {token:String})`,
          { previous, lease: leaseKey(held.huntId), token: held.token },
        );
      } else {
        await command(`DELETE FROM ${table} WHERE claim_key IN {keys:Array(String)} AND token = {token:String}`, {
          keys: [leaseKey(held.huntId), recordKey(held.huntId, held.fire)],
          token: held.token,
        });
      }
      await mirror(held, 'release');
    },
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
