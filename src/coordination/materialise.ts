import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable, quoteDatabase } from '../clickhouse/identifiers.js';
import type { CoordinationSettings } from './topology.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import { TABLES } from './tables.js';

/**
 * `materialise` (docs/tables.md#materialise), the only writer of hunt_schedule: one row per live
 * hunt, a tombstone (`enabled = 0`, interval 0) for each enabled row whose hunt
 * left the config. Diff-aware, so a second run writes nothing. The plan is pure;
 * `materialise` reads the collapsed table, plans, and writes the plan's rows.
 */
export interface ScheduleRow {
  readonly hunt_id: string;
  readonly interval_seconds: number;
  readonly phase_offset: number;
  readonly enabled: number;
}

export interface MaterialisePlan {
  readonly writes: readonly ScheduleRow[];
  /** Live hunts (N in the summary line). */
  readonly live: number;
  readonly added: number;
  readonly changed: number;
  readonly tombstoned: number;
}

export function planMaterialise(current: readonly ScheduleRow[], hunts: readonly HuntSpec[]): MaterialisePlan {
  const existing = new Map(current.map((row) => [row.hunt_id, row]));
  const wanted = new Set(hunts.map((h) => h.huntId));
  const writes: ScheduleRow[] = [];
  let added = 0;
  let changed = 0;
  let tombstoned = 0;
  for (const hunt of hunts) {
    const row = { hunt_id: hunt.huntId, interval_seconds: hunt.intervalSeconds, phase_offset: hunt.phaseOffset, enabled: 1 };
    const now = existing.get(hunt.huntId);
    if (!now || now.enabled !== 1) added += 1;
    else if (now.interval_seconds !== row.interval_seconds || now.phase_offset !== row.phase_offset) changed += 1;
    else continue;
    writes.push(row);
  }
  for (const row of current) {
    if (row.enabled === 1 && !wanted.has(row.hunt_id)) {
      writes.push({ hunt_id: row.hunt_id, interval_seconds: 0, phase_offset: 0, enabled: 0 });
      tombstoned += 1;
    }
  }
  return { writes, live: hunts.length, added, changed, tombstoned };
}

export function materialiseSummary(plan: MaterialisePlan, database: string): string {
  return (
    `materialised ${plan.live} hunt(s) into ${database}.${TABLES.schedule} ` +
    `(${plan.added} added, ${plan.changed} changed, ${plan.tombstoned} tombstoned)`
  );
}

type RawScheduleRow = { hunt_id: string; interval_seconds: number | string; phase_offset: number | string; enabled: number | string };

export async function readSchedule(client: ClickHouseClient, database: string, settings: CoordinationSettings): Promise<ScheduleRow[]> {
  const rs = await client.query({
    query: `SELECT hunt_id, argMax(interval_seconds, updated) AS interval_seconds, argMax(phase_offset, updated) AS phase_offset,
              argMax(enabled, updated) AS enabled
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
  }));
}

export async function materialise(
  client: ClickHouseClient,
  database: string,
  hunts: readonly HuntSpec[],
  settings: CoordinationSettings,
): Promise<MaterialisePlan> {
  const plan = planMaterialise(await readSchedule(client, database, settings), hunts);
  if (plan.writes.length > 0) {
    await client.insert({
      table: `${quoteDatabase(database)}.${TABLES.schedule}`,
      values: [...plan.writes],
      columns: ['hunt_id', 'interval_seconds', 'phase_offset', 'enabled'],
      format: 'JSONEachRow',
      clickhouse_settings: settings.write,
    });
  }
  return plan;
}
