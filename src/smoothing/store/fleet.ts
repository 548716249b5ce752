import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import type { SmoothingConfig } from '../../config/load.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import { TABLES } from '../../coordination/tables.js';
import { fillMissingCosts } from '../cost.js';
import { DEFAULT_CPU_CORES, DEFAULT_MEMORY_CAP_BYTES, type Capacity, type FleetView, type ScheduleEntry } from '../fleet-view.js';
import type { HuntCost } from '../model.js';
import { readCosts, type CostSource } from './cost-source.js';
import { readDisabled } from './hunt-state.js';

/**
 * The planner's reads and writes of hunt_schedule (docs/smoothing.md): the live
 * schedule, the fleet view in one go, the server's capacity, and a committed move.
 */
type RawEntry = { hunt_id: string; interval_seconds: string | number; phase_offset: string | number; offset_source: string; moved_ms: string | number };

export async function readScheduleEntries(client: ClickHouseClient, database: string, settings: CoordinationSettings): Promise<ScheduleEntry[]> {
  const rs = await client.query({
    query: `SELECT hunt_id, interval_seconds, phase_offset, offset_source, moved_ms FROM (
        SELECT hunt_id, argMax(interval_seconds, updated) AS interval_seconds, argMax(phase_offset, updated) AS phase_offset,
          argMax(enabled, updated) AS enabled, argMax(offset_source, updated) AS offset_source,
          toUnixTimestamp64Milli(argMax(moved_at, updated)) AS moved_ms
        FROM ${qualifiedTable(database, TABLES.schedule)} GROUP BY hunt_id)
      WHERE enabled = 1 AND interval_seconds > 0 ORDER BY hunt_id`,
    format: 'JSONEachRow',
    clickhouse_settings: settings.read,
  });
  return (await rs.json<RawEntry>()).map((r) => ({
    huntId: r.hunt_id,
    intervalSeconds: Number(r.interval_seconds),
    phaseOffset: Number(r.phase_offset),
    offsetSource: r.offset_source === 'learned' || r.offset_source === 'pinned' ? r.offset_source : 'hash',
    movedAtMs: Number(r.moved_ms),
  }));
}

export async function readFleet(
  client: ClickHouseClient,
  database: string,
  settings: CoordinationSettings,
  costSource: CostSource,
  costWindowSeconds: number,
): Promise<FleetView> {
  const [schedule, disabled, measured, now] = await Promise.all([
    readScheduleEntries(client, database, settings),
    readDisabled(client, database, settings),
    readCosts(client, database, settings, costSource, costWindowSeconds),
    client.query({ query: 'SELECT toInt64(toUnixTimestamp(now())) AS now_s', format: 'JSONEachRow' }).then((rs) => rs.json<{ now_s: string | number }>()),
  ]);
  const ids = schedule.map((e) => e.huntId);
  const known = new Map<string, HuntCost | null>(ids.map((id) => [id, measured.costs.get(id) ?? null]));
  return {
    schedule,
    disabled,
    costSource,
    measured: measured.costs,
    runs: measured.runs,
    costs: fillMissingCosts(known, ids),
    serverNowSeconds: Number(now[0]?.now_s ?? 0),
  };
}

/** M_cap and cores: the setting, else what the server tells (max_server_memory_usage, max_threads), else defaults. */
export async function resolveCapacity(client: ClickHouseClient, config: SmoothingConfig): Promise<Capacity> {
  let serverMemory = 0;
  let serverCores = 0;
  if (config.memoryCapBytes === undefined || config.cpuCores === undefined) {
    try {
      const rs = await client.query({
        query: "SELECT toString(getServerSetting('max_server_memory_usage')) AS mem, toString(getSetting('max_threads')) AS threads",
        format: 'JSONEachRow',
      });
      const [row] = await rs.json<{ mem: string; threads: string }>();
      serverMemory = Number(row?.mem) || 0;
      serverCores = Number(/\d+/.exec(row?.threads ?? '')?.[0] ?? 0) || 0;
    } catch {
      // An old server without getServerSetting: the defaults below.
    }
  }
  const memory = config.memoryCapBytes ?? (serverMemory > 0 ? serverMemory : DEFAULT_MEMORY_CAP_BYTES);
  const cores = config.cpuCores ?? (serverCores > 0 ? serverCores : DEFAULT_CPU_CORES);
  return {
    memoryCapBytes: memory,
    cpuCores: cores,
    memoryFrom: config.memoryCapBytes !== undefined ? 'setting' : serverMemory > 0 ? 'server' : 'default',
    cpuFrom: config.cpuCores !== undefined ? 'setting' : serverCores > 0 ? 'server' : 'default',
  };
}

/**
 * Commits a phase move (or a back-off): a new hunt_schedule row, same hunt, the
 * new offset, offset_source = learned, moved_at = now. The due SQL and every
 * runner read it at their next tick. Values are bound parameters.
 */
export async function writeScheduleMove(
  client: ClickHouseClient,
  database: string,
  settings: CoordinationSettings,
  move: { readonly huntId: string; readonly intervalSeconds: number; readonly phaseOffset: number },
): Promise<void> {
  // moved_at from the ClickHouse clock, like every coordination decision.
  await client.command({
    query: `INSERT INTO ${qualifiedTable(database, TABLES.schedule)} (hunt_id, interval_seconds, phase_offset, enabled, offset_source, moved_at)
      SELECT {hunt:String}, {interval:Int64}, {offset:Int64}, 1, 'learned', now64(3)`,
    query_params: { hunt: move.huntId, interval: move.intervalSeconds, offset: move.phaseOffset },
    clickhouse_settings: { ...settings.write, log_comment: '', insert_deduplication_token: '' },
  });
}
