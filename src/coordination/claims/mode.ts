import { randomBytes } from 'node:crypto';
import { setTimeout as pause } from 'node:timers/promises';
import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import { DfeError, describeError } from '../../errors.js';
import { keeperClaimTableDdl, TABLES, type ResolvedTopology } from '../tables.js';
import { isKeyConflict } from './keeper-claims.js';
import type { ClaimMode } from './protocol.js';

/**
 * Which claim mode (docs/claim-protocol.md#choosing-the-mode): `schema --apply` and
 * a runner's start probe whether KeeperMap works on the target and record the
 * result in hunt_coordination; `DFE_COORDINATION_CLAIMS` overrides.
 */
export type ClaimsSetting = 'auto' | ClaimMode;

const MODE_KEY = 'claims';

export interface ProbeResult {
  readonly mode: ClaimMode;
  /** Why Keeper mode is not available, when it is not. */
  readonly reason?: string;
}

/**
 * Creates hunt_claim (idempotent), then checks strict-mode semantics on a probe
 * key: the first insert succeeds, the second fails with KEEPER_EXCEPTION, the
 * delete removes it. Any failure means `tables`, with the reason.
 *
 * A second insert accepted is asked again (PROBE_ATTEMPTS in all): runners that
 * start together can see hunt_claim dropped and made again between one probe's
 * two inserts (dropIfOrphaned), which takes the first key with it. Only an answer
 * that repeats says strict mode does not hold.
 */
export async function probeKeeperMap(client: ClickHouseClient, database: string, topology: ResolvedTopology): Promise<ProbeResult> {
  let result = await probeOnce(client, database, topology);
  for (let attempt = 1; attempt < PROBE_ATTEMPTS && result.mode === 'tables' && result.accepted === true; attempt++) {
    await pause(RECHECK_PAUSE_MS);
    result = await probeOnce(client, database, topology);
  }
  return result.reason === undefined ? { mode: result.mode } : { mode: result.mode, reason: result.reason };
}

const PROBE_ATTEMPTS = 3;
/** Between two looks at hunt_claim: long enough for a racing CREATE to finish. */
const RECHECK_PAUSE_MS = 300;

async function probeOnce(client: ClickHouseClient, database: string, topology: ResolvedTopology): Promise<ProbeResult & { readonly accepted?: true }> {
  const table = qualifiedTable(database, TABLES.claim);
  // Its own key, so probes that race (runners starting together) do not see each other's.
  const PROBE_KEY = `/probe/${randomBytes(6).toString('hex')}`;
  const settings = { keeper_map_strict_mode: 1 as const };
  const row = { claim_key: PROBE_KEY, hunt_id: '', fire: 0, owner: 'probe', token: 'probe', lease_until: 0 };
  const insert = () => client.insert({ table, values: [row], format: 'JSONEachRow', clickhouse_settings: settings });
  const remove = () =>
    client.command({ query: `DELETE FROM ${table} WHERE claim_key = {key:String}`, query_params: { key: PROBE_KEY }, clickhouse_settings: settings });
  try {
    await dropIfOrphaned(client, table);
    await client.command({ query: keeperClaimTableDdl(database, topology) });
    await remove();
    await insert();
    const second = await insert().then(
      () => 'accepted',
      (err: unknown) => (isKeyConflict(err) ? 'refused' : describeError(err)),
    );
    await remove();
    if (second !== 'refused') {
      const reason = `a second strict insert of one key was not refused (${second})`;
      return second === 'accepted' ? { mode: 'tables', reason, accepted: true } : { mode: 'tables', reason };
    }
    return { mode: 'keeper' };
  } catch (err) {
    return { mode: 'tables', reason: describeError(err) };
  }
}

/**
 * A KeeperMap table whose Keeper data is gone (the embedded engine's testkeeper
 * lives in memory, so after a restart every KeeperMap table is in this state)
 * refuses every query with "invalid metadata in ZooKeeper"; it holds nothing
 * any more, so it is dropped and created again. Dropping a live table would take
 * every claim with it, so the refusal must hold over ORPHAN_LOOKS looks a pause
 * apart: a table another runner is creating that moment answers within them.
 */
async function dropIfOrphaned(client: ClickHouseClient, table: string): Promise<void> {
  for (let look = 1; ; look++) {
    if (!(await refusedAsOrphaned(client, table))) return;
    if (look === ORPHAN_LOOKS) break;
    await pause(RECHECK_PAUSE_MS);
  }
  await client.command({ query: `DROP TABLE IF EXISTS ${table} SYNC` });
}

const ORPHAN_LOOKS = 3;

async function refusedAsOrphaned(client: ClickHouseClient, table: string): Promise<boolean> {
  try {
    await client.query({ query: `SELECT count() FROM ${table} WHERE claim_key = ''`, format: 'JSONEachRow' }).then((rs) => rs.text());
    return false;
  } catch (err) {
    return /invalid metadata in ZooKeeper/i.test(describeError(err));
  }
}

export async function recordClaimMode(client: ClickHouseClient, database: string, mode: ClaimMode, writeSettings = {}): Promise<void> {
  await client.insert({
    table: qualifiedTable(database, TABLES.coordination),
    values: [{ key: MODE_KEY, value: mode }],
    columns: ['key', 'value'],
    format: 'JSONEachRow',
    clickhouse_settings: { ...writeSettings, log_comment: '', insert_deduplication_token: '' },
  });
}

/** The recorded mode, or undefined when none is recorded (or the table is missing). */
export async function readClaimMode(client: ClickHouseClient, database: string, readSettings = {}): Promise<ClaimMode | undefined> {
  try {
    const rs = await client.query({
      query: `SELECT argMax(value, updated) AS mode, count() AS n FROM ${qualifiedTable(database, TABLES.coordination)} WHERE key = {key:String}`,
      query_params: { key: MODE_KEY },
      format: 'JSONEachRow',
      clickhouse_settings: readSettings,
    });
    const [row] = await rs.json<{ mode: string; n: number | string }>();
    if (!row || Number(row.n) === 0) return undefined;
    return row.mode === 'keeper' || row.mode === 'tables' ? row.mode : undefined;
  } catch {
    return undefined;
  }
}

/** `schema --apply`: probe and record. Returns what was recorded. */
export async function probeAndRecord(
  client: ClickHouseClient,
  database: string,
  topology: ResolvedTopology,
  writeSettings = {},
): Promise<ProbeResult> {
  const result = await probeKeeperMap(client, database, topology);
  await recordClaimMode(client, database, result.mode, writeSettings);
  return result;
}

export interface ResolvedClaimMode {
  readonly mode: ClaimMode;
  /** `override` (DFE_COORDINATION_CLAIMS), `recorded` (hunt_coordination) or `probed` (just now). */
  readonly source: 'override' | 'recorded' | 'probed';
}

/**
 * A runner's mode: the override, else the recorded choice, else a probe (recorded).
 * `keeper` forced on a target where KeeperMap does not work is a configuration error.
 */
export async function resolveClaimMode(
  client: ClickHouseClient,
  database: string,
  topology: ResolvedTopology,
  setting: ClaimsSetting,
  settings: { readonly read?: object; readonly write?: object } = {},
): Promise<ResolvedClaimMode> {
  if (setting === 'tables') return { mode: 'tables', source: 'override' };
  if (setting === 'keeper') {
    const probe = await probeKeeperMap(client, database, topology);
    if (probe.mode !== 'keeper') {
      throw new DfeError('CONFIG_INVALID', `invalid DFE_COORDINATION_CLAIMS="keeper": KeeperMap does not work on this ClickHouse (${probe.reason ?? 'unknown'})`, {
        key: 'DFE_COORDINATION_CLAIMS',
        value: 'keeper',
      });
    }
    return { mode: 'keeper', source: 'override' };
  }
  const recorded = await readClaimMode(client, database, settings.read);
  if (recorded === 'keeper') {
    // Never fall back on our own: peers follow the record. Wait (ticks are skipped) until Keeper answers.
    const probe = await probeKeeperMap(client, database, topology);
    if (probe.mode !== 'keeper') throw new DfeError('CLICKHOUSE_FAILED', `claim mode keeper is recorded, but KeeperMap does not work now (${probe.reason ?? 'unknown'})`);
  }
  if (recorded) return { mode: recorded, source: 'recorded' };
  const probed = await probeAndRecord(client, database, topology, settings.write);
  return { mode: probed.mode, source: 'probed' };
}
