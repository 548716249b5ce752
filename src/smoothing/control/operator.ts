import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import type { ClickHouseHandle } from '../../clickhouse/client.js';
import type { AppConfig } from '../../config/load.js';
import { withCoordination } from '../../coordination/open.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import { DfeError, describeError } from '../../errors.js';
import type { HuntCeilings } from '../../schedule/ceilings.js';
import { loadHuntsDir } from '../../schedule/hunt-files.js';
import { effectiveCeilings } from '../ceiling-rules.js';
import { buildCurve } from '../curve.js';
import { cycleAt, settledHunts, type Capacity, type FleetView } from '../fleet-view.js';
import type { LoadCurve, PlanResult } from '../model.js';
import { planReport } from '../plan-report.js';
import { planCycles } from '../planner.js';
import { renderCurve } from '../render.js';
import { writeScheduleMove } from '../store/fleet.js';
import { enableHunt, readDisabled, type DisabledHunt } from '../store/hunt-state.js';
import { PlanningReader, type PlanningInput } from './planning.js';

/**
 * `dfe-hunt-runner smoothing plan|apply|status|export` (docs/smoothing.md,
 * "Rolling it out"). `plan` writes nothing; `apply` writes the planned moves as
 * learned offsets; `status` shows the schedule, the cost model and its source;
 * `export` writes settled learned offsets into the hunt files. Each returns the
 * text to print; the CLI prints it. And `enable`, which lifts an auto-disable.
 */
export const SMOOTHING_VERBS = ['plan', 'apply', 'status', 'export'] as const;
export type SmoothingVerb = (typeof SMOOTHING_VERBS)[number];

export interface SmoothingCommandOptions {
  readonly json: boolean;
  /** Planning cycles `plan` and `apply` simulate. */
  readonly cycles: number;
}

/** Where a verb runs: the config, and ClickHouse already open with the coordination settings. */
export interface SmoothingScope {
  readonly config: AppConfig;
  readonly handle: ClickHouseHandle;
  readonly settings: CoordinationSettings;
}

interface Context extends SmoothingScope, SmoothingCommandOptions {
  readonly huntsDir: string;
  readonly out: (text: string) => void;
}

/** Runs one verb against the configured ClickHouse; returns what it has to say. */
export function smoothingCommand(config: AppConfig, verb: SmoothingVerb, options: SmoothingCommandOptions): Promise<string> {
  return withCoordination(config, ({ handle, settings }) => smoothingVerb({ config, handle, settings }, verb, options));
}

/** One verb on an open ClickHouse; returns the text (with --json, one JSON document). */
export async function smoothingVerb(scope: SmoothingScope, verb: SmoothingVerb, options: SmoothingCommandOptions): Promise<string> {
  const commands = { plan: planCommand, apply: applyCommand, status: statusCommand, export: exportCommand } as const;
  let text = '';
  await commands[verb]({ ...scope, ...options, huntsDir: scope.config.runner.huntsDir, out: (t) => void (text += t) });
  return text;
}

const CURVE_WIDTH = 72;

function load(ctx: Context): Promise<PlanningInput> {
  return new PlanningReader(ctx.handle.client, ctx.config.clickhouse.dataDatabase, ctx.settings, ctx.config.runner.smoothing).read();
}

function simulate(ctx: Context, input: PlanningInput): PlanResult {
  // The simulated cycles are the slots after this one; cool-downs from moved_at apply to them as they would.
  const start = cycleAt(input.view.serverNowSeconds, ctx.config.runner.smoothing.cycleSeconds) + 1;
  return planCycles(input.loads, input.planner, ctx.cycles, input.cooldown, start);
}

function fmt(n: number): string {
  return Number.isFinite(n) ? n.toPrecision(4) : String(n);
}

function curveLines(label: string, curve: LoadCurve, sharedMax: number): string[] {
  return [
    `${label.padEnd(7)}${renderCurve(curve, CURVE_WIDTH, sharedMax)}`,
    `${''.padEnd(7)}flatness ${fmt(curve.flatness)}  peak ${fmt(curve.peak)}  mean ${fmt(curve.mean)}  J ${fmt(curve.objective)}  memory peak ${curve.memoryPeakBytes} B`,
  ];
}

function drawPlan(ctx: Context, result: PlanResult, view: FleetView, capacity: Capacity): void {
  const shared = Math.max(result.before.peak, result.after.peak);
  const lines = [
    `${view.schedule.length} hunt(s), hyperperiod ${result.before.hyperperiodSeconds} s in ${result.before.buckets} bucket(s) of ${result.before.bucketSeconds} s; ` +
      `costs from ${view.costSource}; memory cap ${capacity.memoryCapBytes} B (${capacity.memoryFrom}), ${capacity.cpuCores} core(s) (${capacity.cpuFrom})`,
    ...curveLines('before', result.before, shared),
    ...curveLines('after', result.after, shared),
    `${result.moves.length} move(s) in ${ctx.cycles} cycle(s):`,
    ...result.moves.map((m) => `  cycle ${m.cycle}: ${m.huntId} ${m.from} → ${m.to}`),
  ];
  ctx.out(`${lines.join('\n')}\n`);
}

async function planCommand(ctx: Context): Promise<void> {
  const input = await load(ctx);
  const { view, capacity } = input;
  const result = simulate(ctx, input);
  if (ctx.json) ctx.out(`${JSON.stringify(planReport(result, input.planner))}\n`);
  else drawPlan(ctx, result, view, capacity);
}

async function applyCommand(ctx: Context): Promise<void> {
  const input = await load(ctx);
  const { view, capacity } = input;
  const result = simulate(ctx, input);
  const finalOffsets = new Map<string, number>();
  for (const m of result.moves) finalOffsets.set(m.huntId, m.to);
  const intervals = new Map(view.schedule.map((e) => [e.huntId, e.intervalSeconds]));
  for (const [huntId, offset] of finalOffsets) {
    const intervalSeconds = intervals.get(huntId);
    if (intervalSeconds === undefined) continue;
    await writeScheduleMove(ctx.handle.client, ctx.config.clickhouse.dataDatabase, ctx.settings, { huntId, intervalSeconds, phaseOffset: offset });
  }
  if (!ctx.json) drawPlan(ctx, result, view, capacity);
  ctx.out(`applied ${finalOffsets.size} learned offset(s) from ${result.moves.length} move(s) into ${ctx.config.clickhouse.dataDatabase}.hunt_schedule\n`);
}

type CeilingShown = { readonly value: number; readonly from: 'hunt' | 'global' };
type CeilingsShown = Partial<Record<'memory_bytes' | 'cpu_us' | 'duration_ms', CeilingShown>>;

/**
 * Each hunt's own `ceilings:` from the hunt files. A hunts directory that cannot be read
 * leaves status working (it reads ClickHouse) and says why the per-hunt ceilings are unknown.
 */
function ownCeilings(ctx: Context): { readonly byHunt: Map<string, HuntCeilings>; readonly problem: string | null } {
  try {
    const set = loadHuntsDir(ctx.huntsDir, ctx.config.runner.spreadFraction);
    return { byHunt: new Map(set.hunts.map((h) => [h.huntId, h.ceilings])), problem: null };
  } catch (err) {
    return { byHunt: new Map(), problem: describeError(err) };
  }
}

/** The ceilings that apply to one hunt, each with where it comes from (docs/smoothing.md, "Escalation"). */
function shownCeilings(ctx: Context, own: HuntCeilings | undefined): CeilingsShown {
  const applied = effectiveCeilings(ctx.config.runner.autoDisable, own);
  const out: { -readonly [K in keyof CeilingsShown]: CeilingShown } = {};
  const add = (key: keyof CeilingsShown, value: number | undefined, ownValue: number | undefined) => {
    if (value !== undefined) out[key] = { value, from: ownValue !== undefined ? 'hunt' : 'global' };
  };
  add('memory_bytes', applied.memoryBytes, own?.memoryBytes);
  add('cpu_us', applied.cpuUs, own?.cpuUs);
  add('duration_ms', applied.durationMs, own?.durationMs);
  return out;
}

function ceilingsText(c: CeilingsShown): string {
  const parts = [
    c.memory_bytes && `mem ${c.memory_bytes.value} B (${c.memory_bytes.from})`,
    c.cpu_us && `cpu ${c.cpu_us.value} µs (${c.cpu_us.from})`,
    c.duration_ms && `dur ${c.duration_ms.value} ms (${c.duration_ms.from})`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(', ') : '-';
}

async function statusCommand(ctx: Context): Promise<void> {
  const { view, capacity, planner: settings, loads } = await load(ctx);
  const smoothing = ctx.config.runner.smoothing;
  const own = ownCeilings(ctx);
  const curve = buildCurve(loads, settings);
  const disabled = new Map(view.disabled.map((d) => [d.huntId, d]));
  const settled = new Set(settledHunts(view.schedule, view.serverNowSeconds, smoothing.settlingSeconds).map((e) => e.huntId));
  const hunts = view.schedule.map((e) => ({
    hunt_id: e.huntId,
    interval_seconds: e.intervalSeconds,
    phase_offset: e.phaseOffset,
    offset_source: e.offsetSource,
    moved_at: e.movedAtMs > 0 ? new Date(e.movedAtMs).toISOString() : null,
    settled: settled.has(e.huntId),
    disabled_reason: disabled.get(e.huntId)?.reason ?? null,
    runs_in_window: view.runs.get(e.huntId) ?? 0,
    cost: view.costs.get(e.huntId) ?? null,
    cost_measured: view.measured.has(e.huntId),
    ceilings: shownCeilings(ctx, own.byHunt.get(e.huntId)),
  }));
  const stats = { objective: curve.objective, flatness: curve.flatness, peak: curve.peak, mean: curve.mean, memory_peak_bytes: curve.memoryPeakBytes };
  if (ctx.json) {
    const report = {
      smoothing: smoothing.mode,
      cost_source: view.costSource,
      cost_window_seconds: smoothing.costWindowSeconds,
      memory_cap_bytes: capacity.memoryCapBytes,
      memory_cap_from: capacity.memoryFrom,
      cpu_cores: capacity.cpuCores,
      cpu_cores_from: capacity.cpuFrom,
      bucket_seconds: settings.bucketSeconds,
      hyperperiod_seconds: curve.hyperperiodSeconds,
      curve: stats,
      disabled: view.disabled.map((d) => ({ hunt_id: d.huntId, reason: d.reason, disabled_at: d.disabledAt })),
      hunt_files_problem: own.problem,
      hunts,
    };
    ctx.out(`${JSON.stringify(report)}\n`);
    return;
  }
  const lines = [
    `smoothing ${smoothing.mode} (DFE_HUNT_SMOOTHING); costs from ${view.costSource} over ${smoothing.costWindowSeconds} s`,
    `memory cap ${capacity.memoryCapBytes} B (${capacity.memoryFrom}), ${capacity.cpuCores} core(s) (${capacity.cpuFrom}), buckets of ${settings.bucketSeconds} s`,
    ...curveLines('now', curve, curve.peak),
    ...(own.problem ? [`per-hunt ceilings unknown: ${own.problem}`] : []),
    'hunt\tinterval\toffset\tsource\tmoved_at\tp95 ms\tp95 cpu µs\tp95 mem B\truns\tceilings\tstate',
    ...hunts.map((h) =>
      [
        h.hunt_id,
        h.interval_seconds,
        h.phase_offset,
        h.offset_source + (h.settled ? ' (settled)' : ''),
        h.moved_at ?? '-',
        h.cost ? Math.round(h.cost.durationMs) : '-',
        h.cost ? Math.round(h.cost.cpuUs) : '-',
        h.cost ? Math.round(h.cost.memoryBytes) : '-',
        h.cost_measured ? h.runs_in_window : `${h.runs_in_window} (median)`,
        ceilingsText(h.ceilings),
        h.disabled_reason ? `DISABLED: ${h.disabled_reason}` : 'enabled',
      ].join('\t'),
    ),
    `${view.disabled.length} hunt(s) auto-disabled${view.disabled.length > 0 ? ' — lift with: dfe-hunt-runner enable <hunt>' : ''}`,
  ];
  ctx.out(`${lines.join('\n')}\n`);
}

/**
 * Writes `schedule.phase_offset` of each settled learned hunt into its file,
 * through the yaml package's Document API so comments and key order stay.
 * Materialise then sees the pin and records it as `pinned` (a promotion).
 */
async function exportCommand(ctx: Context): Promise<void> {
  const { view } = await load(ctx);
  const settled = settledHunts(view.schedule, view.serverNowSeconds, ctx.config.runner.smoothing.settlingSeconds);
  let written = 0;
  const missing: string[] = [];
  for (const e of settled) {
    const file = join(ctx.huntsDir, `${e.huntId}.yaml`);
    if (!existsSync(file)) {
      missing.push(e.huntId);
      continue;
    }
    const doc = parseDocument(readFileSync(file, 'utf8'));
    if (doc.errors.length > 0) throw new DfeError('HUNT_SPEC_INVALID', `${file}: is not valid YAML (${doc.errors[0]?.message ?? ''})`, { file, key: 'yaml' });
    if (doc.getIn(['schedule', 'phase_offset']) === e.phaseOffset) continue;
    doc.setIn(['schedule', 'phase_offset'], e.phaseOffset);
    writeFileSync(file, doc.toString());
    written += 1;
    ctx.out(`${file}: schedule.phase_offset = ${e.phaseOffset}\n`);
  }
  ctx.out(`exported ${written} settled offset(s) of ${settled.length} settled hunt(s) into ${ctx.huntsDir}${missing.length ? ` (no file for: ${missing.join(', ')})` : ''}\n`);
}

/** `enable <hunt>`: lifts an auto-disable; returns what was lifted, or null when the hunt was not disabled. */
export function enableHuntNow(config: AppConfig, huntId: string): Promise<DisabledHunt | null> {
  const database = config.clickhouse.dataDatabase;
  return withCoordination(config, async ({ handle, settings }) => {
    const was = (await readDisabled(handle.client, database, settings)).find((d) => d.huntId === huntId);
    if (!was) return null;
    await enableHunt(handle.client, database, settings, huntId);
    return was;
  });
}
