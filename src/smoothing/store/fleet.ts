import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../../clickhouse/identifiers.js';
import type { SmoothingConfig } from '../../config/load.js';
import type { OffsetSource } from '../../coordination/materialise.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import { TABLES } from '../../coordination/tables.js';
import { fillMissingCosts } from '../../smoothing/cost.js';
import { readCosts, type CostSource } from './cost-source.js';
import { readDisabled, type DisabledHunt } from './hunt-state.js';
import type { CooldownState, HuntCost, HuntLoad, PlannerSettings } from '../../smoothing/model.js';

/**
 * What the planner plans on (docs/smoothing.md): the live schedule, who is
 * disabled, and the cost model, read from ClickHouse in one go. The controller,
 * `smoothing plan|apply|status|export` all start here.
 */
export interface FleetView {
  readonly schedule: readonly ScheduleEntry[];
  readonly disabled: readonly DisabledHunt[];
  readonly costSource: CostSource;
  /** p95 costs of the hunts with runs in the window. */
  readonly measured: ReadonlyMap<string, HuntCost>;
  readonly runs: ReadonlyMap<string, number>;
  /** Every live hunt's cost, the fleet median where it has no runs yet. */
  readonly costs: ReadonlyMap<string, HuntCost>;
  /** The ClickHouse clock when read, epoch seconds. */
  readonly serverNowSeconds: number;
}

/** The live hunt_schedule row of one hunt (the latest, enabled, with an interval). */
export interface ScheduleEntry {
  readonly huntId: string;
  readonly intervalSeconds: number;
  readonly phaseOffset: number;
  readonly offsetSource: OffsetSource;
  /** moved_at in epoch ms; 0 = never moved by the controller. */
  readonly movedAtMs: number;
}

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

/** The planner's input (pure): pinned and disabled hunts load the curve but never move. */
export function huntLoads(view: FleetView): HuntLoad[] {
  const disabled = new Set(view.disabled.map((d) => d.huntId));
  const out: HuntLoad[] = [];
  for (const e of view.schedule) {
    const cost = view.costs.get(e.huntId);
    if (!cost) continue;
    out.push({
      huntId: e.huntId,
      periodSeconds: e.intervalSeconds,
      offsetSeconds: e.phaseOffset,
      movable: e.offsetSource !== 'pinned' && !disabled.has(e.huntId),
      cost,
    });
  }
  return out;
}

/** Planning cycle number of an instant: cycles are wall-clock slots of cycle_seconds. */
export function cycleAt(epochSeconds: number, cycleSeconds: number): number {
  return Math.floor(epochSeconds / cycleSeconds);
}

/** Cool-down memory derived from moved_at, so it survives restarts and planner hand-overs. */
export function cooldownFromSchedule(schedule: readonly ScheduleEntry[], cycleSeconds: number): CooldownState {
  const out = new Map<string, number>();
  for (const e of schedule) if (e.movedAtMs > 0) out.set(e.huntId, cycleAt(e.movedAtMs / 1000, cycleSeconds));
  return out;
}

/** Settled (docs/smoothing.md): a learned offset not moved for settling_seconds; export promotes it. */
export function settledHunts(schedule: readonly ScheduleEntry[], nowSeconds: number, settlingSeconds: number): ScheduleEntry[] {
  return schedule.filter((e) => e.offsetSource === 'learned' && e.movedAtMs > 0 && nowSeconds - e.movedAtMs / 1000 >= settlingSeconds);
}

export interface Capacity {
  readonly memoryCapBytes: number;
  readonly cpuCores: number;
  /** Where each came from, for `smoothing status`. */
  readonly memoryFrom: 'setting' | 'server' | 'default';
  readonly cpuFrom: 'setting' | 'server' | 'default';
}

/** Used when neither the setting nor the server tells (docs/smoothing.md). */
export const DEFAULT_MEMORY_CAP_BYTES = 8 * 1024 ** 3;
export const DEFAULT_CPU_CORES = 1;

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

export function plannerSettings(config: SmoothingConfig, capacity: Capacity): PlannerSettings {
  return {
    bucketSeconds: config.bucketSeconds,
    cpuCores: capacity.cpuCores,
    memoryCapBytes: capacity.memoryCapBytes,
    weights: config.weights,
    maxStepFraction: config.maxStepFraction,
    hysteresis: config.hysteresis,
    cooldownCycles: config.cooldownCycles,
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
