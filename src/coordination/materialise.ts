import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable, quoteDatabase } from '../clickhouse/identifiers.js';
import type { Logger } from '../log.js';
import type { CoordinationSettings } from './topology.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import { TABLES } from './tables.js';
import { forgetRemovedHunts } from './claims/keeper-claims.js';
import { checkOutputDedup, warnOutputDedup, type OutputDedupFinding } from './output-dedup.js';

/**
 * `materialise` (docs/tables.md#materialise), the only writer of hunt_schedule: one row per live
 * hunt, a tombstone (`enabled = 0`, interval 0) for each enabled row whose hunt
 * left the config. Diff-aware, so a second run writes nothing. The plan is pure;
 * `materialise` reads the collapsed table, plans, and writes the plan's rows.
 *
 * One offset source (docs/smoothing.md): hunt_schedule.phase_offset is what
 * runs. Materialise writes the hash for a new hunt or a changed interval, the
 * pinned value where the file pins one, and otherwise KEEPS the offset in the
 * table, so an offset the smoothing controller learned survives every
 * re-materialise. An interval the controller backed off (a power-of-two
 * multiple of the configured one, at most 8×, marked in hunt_state) is kept too.
 */
export type OffsetSource = 'hash' | 'learned' | 'pinned';

export interface ScheduleRow {
  readonly hunt_id: string;
  readonly interval_seconds: number;
  readonly phase_offset: number;
  readonly enabled: number;
  readonly offset_source: OffsetSource;
}

/** The most an interval back-off multiplies the configured interval (docs/smoothing.md). */
export const MAX_BACKOFF_FACTOR = 8;

/** True when `effective` is the configured interval doubled 1..3 times. */
export function isBackedOff(effective: number, configured: number): boolean {
  for (let factor = 2; factor <= MAX_BACKOFF_FACTOR; factor *= 2) if (effective === configured * factor) return true;
  return false;
}

function wantedRow(hunt: HuntSpec, now: ScheduleRow | undefined, backedOff: ReadonlySet<string>): ScheduleRow {
  const base = { hunt_id: hunt.huntId, enabled: 1 };
  const live = now?.enabled === 1 ? now : undefined;
  const sameInterval =
    live !== undefined &&
    (live.interval_seconds === hunt.intervalSeconds || (backedOff.has(hunt.huntId) && isBackedOff(live.interval_seconds, hunt.intervalSeconds)));
  const interval = sameInterval ? live.interval_seconds : hunt.intervalSeconds;
  if (hunt.pinnedOffset !== undefined) {
    // A pin is in seconds of the configured interval; a backed-off interval is a multiple, so it still fits.
    return { ...base, interval_seconds: interval, phase_offset: hunt.pinnedOffset, offset_source: 'pinned' };
  }
  // Keep what the table says (hash or learned) unless the interval changed or a pin was just removed.
  if (sameInterval && live.offset_source !== 'pinned') return live;
  return { ...base, interval_seconds: hunt.intervalSeconds, phase_offset: hunt.phaseOffset, offset_source: 'hash' };
}

function sameRow(a: ScheduleRow, b: ScheduleRow): boolean {
  return a.interval_seconds === b.interval_seconds && a.phase_offset === b.phase_offset && a.offset_source === b.offset_source;
}

export interface MaterialisePlan {
  readonly writes: readonly ScheduleRow[];
  /** Live hunts (N in the summary line). */
  readonly live: number;
  readonly added: number;
  readonly changed: number;
  readonly tombstoned: number;
  /** Learned offsets that came back pinned at the same offset (an exported, committed promotion). */
  readonly promoted: readonly string[];
}

export function planMaterialise(
  current: readonly ScheduleRow[],
  hunts: readonly HuntSpec[],
  backedOff: ReadonlySet<string> = new Set(),
): MaterialisePlan {
  const existing = new Map(current.map((row) => [row.hunt_id, row]));
  const wanted = new Set(hunts.map((h) => h.huntId));
  const writes: ScheduleRow[] = [];
  let added = 0;
  let changed = 0;
  let tombstoned = 0;
  const promoted: string[] = [];
  for (const hunt of hunts) {
    const now = existing.get(hunt.huntId);
    const row = wantedRow(hunt, now, backedOff);
    if (!now || now.enabled !== 1) added += 1;
    else if (!sameRow(now, row)) changed += 1;
    else continue;
    if (now?.enabled === 1 && now.offset_source === 'learned' && row.offset_source === 'pinned' && now.phase_offset === row.phase_offset) {
      promoted.push(hunt.huntId);
    }
    writes.push(row);
  }
  for (const row of current) {
    if (row.enabled === 1 && !wanted.has(row.hunt_id)) {
      writes.push({ hunt_id: row.hunt_id, interval_seconds: 0, phase_offset: 0, enabled: 0, offset_source: 'hash' });
      tombstoned += 1;
    }
  }
  return { writes, live: hunts.length, added, changed, tombstoned, promoted };
}

/** What `materialise` did: the plan written, and the Keeper keys of removed hunts it deleted. */
export interface MaterialiseResult extends MaterialisePlan {
  readonly keeperKeysDeleted: number;
  /** Set when that cleanup failed (the schedule was written; the keys wait for the next run). */
  readonly keeperCleanupError?: unknown;
  /** Each hunt's output tables and whether they deduplicate a repeated insert (coordination/output-dedup.ts). */
  readonly outputDedup: readonly OutputDedupFinding[];
  /** Set when that check could not read system.tables (the schedule was written all the same). */
  readonly outputDedupError?: unknown;
}

/**
 * The warnings of a materialise, the lines both callers log: a failed Keeper cleanup, and one
 * per hunt and output table that does not deduplicate a repeated insert (docs/claim-protocol.md).
 */
export function warnMaterialise(log: Pick<Logger, 'warn'>, result: MaterialiseResult): void {
  if (result.keeperCleanupError !== undefined) {
    log.warn({ err: result.keeperCleanupError }, 'could not delete the Keeper keys of removed hunts; the next materialise tries again');
  }
  if (result.outputDedupError !== undefined) {
    log.warn({ err: result.outputDedupError }, "could not check whether the hunts' output tables deduplicate inserts (system.tables)");
  }
  warnOutputDedup(log, result.outputDedup);
}

export function materialiseSummary(plan: MaterialisePlan | MaterialiseResult, database: string): string {
  const keys = 'keeperKeysDeleted' in plan && plan.keeperKeysDeleted > 0 ? `; ${plan.keeperKeysDeleted} Keeper key(s) of removed hunts deleted` : '';
  return (
    `materialised ${plan.live} hunt(s) into ${database}.${TABLES.schedule} ` +
    `(${plan.added} added, ${plan.changed} changed, ${plan.tombstoned} tombstoned${keys})`
  );
}

type RawScheduleRow = {
  hunt_id: string;
  interval_seconds: number | string;
  phase_offset: number | string;
  enabled: number | string;
  offset_source: string;
};

function offsetSource(raw: string): OffsetSource {
  return raw === 'learned' || raw === 'pinned' ? raw : 'hash';
}

export async function readSchedule(client: ClickHouseClient, database: string, settings: CoordinationSettings): Promise<ScheduleRow[]> {
  const rs = await client.query({
    query: `SELECT hunt_id, argMax(interval_seconds, updated) AS interval_seconds, argMax(phase_offset, updated) AS phase_offset,
              argMax(enabled, updated) AS enabled, argMax(offset_source, updated) AS offset_source
            FROM ${qualifiedTable(database, TABLES.schedule)} GROUP BY hunt_id ORDER BY hunt_id`,
    format: 'JSONEachRow',
    clickhouse_settings: settings.read,
  });
  const rows = await rs.json<RawScheduleRow>();
  return rows.map((r) => ({
    hunt_id: r.hunt_id,
    interval_seconds: Number(r.interval_seconds),
    phase_offset: Number(r.phase_offset),
    enabled: Number(r.enabled),
    offset_source: offsetSource(r.offset_source),
  }));
}

export async function materialise(
  client: ClickHouseClient,
  database: string,
  hunts: readonly HuntSpec[],
  settings: CoordinationSettings,
): Promise<MaterialiseResult> {
  const [current, backedOff] = await Promise.all([readSchedule(client, database, settings), readBackedOff(client, database, settings)]);
  const plan = planMaterialise(current, hunts, backedOff);
  if (plan.writes.length > 0) {
    await client.insert({
      table: `${quoteDatabase(database)}.${TABLES.schedule}`,
      values: [...plan.writes],
      columns: ['hunt_id', 'interval_seconds', 'phase_offset', 'enabled', 'offset_source'],
      format: 'JSONEachRow',
      clickhouse_settings: settings.write,
    });
  }
  // Keeper mode: a removed hunt's keys go with it (docs/claim-protocol.md#keeper-mode, "Keys").
  const keeper = await forgetRemovedHunts(client, database, hunts.map((h) => h.huntId)).then(
    (deleted) => ({ keeperKeysDeleted: deleted }),
    (err: unknown) => ({ keeperKeysDeleted: 0, keeperCleanupError: err }),
  );
  const dedup = await checkOutputDedup(client, hunts, settings.read).then(
    (findings) => ({ outputDedup: findings }),
    (err: unknown) => ({ outputDedup: [], outputDedupError: err }),
  );
  return { ...plan, ...keeper, ...dedup };
}

/** Hunts whose newest hunt_state row says the controller backed their interval off (`too_aggressive = 1`). */
export async function readBackedOff(client: ClickHouseClient, database: string, settings: CoordinationSettings): Promise<Set<string>> {
  const rs = await client.query({
    query: `SELECT hunt_id FROM ${qualifiedTable(database, TABLES.state)} GROUP BY hunt_id HAVING argMax(too_aggressive, updated) = 1`,
    format: 'JSONEachRow',
    clickhouse_settings: settings.read,
  });
  return new Set((await rs.json<{ hunt_id: string }>()).map((r) => r.hunt_id));
}
