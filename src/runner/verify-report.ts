import type { ClickHouseSettings } from '@clickhouse/client';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import { qualifiedTable } from '../clickhouse/identifiers.js';
import type { ClaimMode } from '../coordination/claims/protocol.js';
import { TABLES } from '../coordination/tables.js';
import { coverage, fireStarts, latestFires, quantile, type Coverage, type FireStart } from './coverage.js';
import type { InjectedFault } from './nemesis/inject.js';
import type { FaultKind } from './nemesis/plan.js';

/**
 * What `verify-coordination` found, counted from the tables — the hunts' output rows and
 * hunt_run, never the runners' counters — and the report as the CLI prints it
 * (docs/operations.md#verify-coordination).
 */
export interface VerifyReport {
  readonly database: string;
  readonly target: string;
  readonly claims: ClaimMode;
  readonly runners: number;
  /** Runners as separate processes (`--nemesis`), else in the verify process. */
  readonly processes: boolean;
  readonly hunts: number;
  readonly seconds: number;
  /** The race by the server's clock (epoch seconds): fires up to `endNow` are counted; a fault at +t s fell near `startNow + t`. */
  readonly startNow: number;
  readonly endNow: number;
  readonly pollSeconds: number;
  readonly leaseSeconds: number;
  /** Concurrent runs per runner. */
  readonly cap: number;
  readonly coverage: Coverage;
  /** (hunt, fire) pairs with more than one `succeeded` row in hunt_run. */
  readonly doubleRunRows: number;
  readonly runs: { readonly succeeded: number; readonly failed: number };
  /** Seconds from each owed fire to the first output row covering it, as its run's hunt statement wrote it (the row's `written`). */
  readonly lateness: { readonly p50: number | undefined; readonly p99: number | undefined; readonly max: number | undefined };
  /** The latest fires (up to LATEST_FIRES), latest first: to set beside the faults' times when the max is over its bound. */
  readonly latestFires: readonly FireStart[];
  /** Up to 10 overlapping pairs: the hunt, both windows and their runs' starts (server clock, epoch seconds). */
  readonly overlapping: ReadonlyArray<{ readonly huntId: string; readonly a: Window; readonly b: Window }>;
  /** The longest succeeded run, seconds. */
  readonly longestRunSeconds: number;
  readonly nemesis?: { readonly seed: number; readonly kinds: readonly FaultKind[]; readonly faults: readonly InjectedFault[] };
  /** Runner processes that ended on their own. */
  readonly unexpectedExits: readonly string[];
  readonly kept: boolean;
  /** Rows in the lease log (`--lease-log`), else absent. */
  readonly leaseLogRows?: number;
  readonly ok: boolean;
}

export interface Window {
  readonly start: number;
  readonly end: number;
  /** When the run wrote this window's output row (server clock, epoch seconds). */
  readonly runStart?: number;
}

export const OUTPUT_TABLE = 'verify_out';

/** Every hunt_lease row the runners wrote, copied by a materialized view (`--lease-log`). */
export const LEASE_LOG_TABLE = 'verify_lease_log';

export async function countLeaseLog(handle: ClickHouseHandle, database: string, read: ClickHouseSettings): Promise<number> {
  const rs = await handle.client.query({ query: `SELECT count() AS n FROM ${qualifiedTable(database, LEASE_LOG_TABLE)}`, format: 'JSONEachRow', clickhouse_settings: read });
  return Number((await rs.json<{ n: number | string }>())[0]?.n ?? 0);
}

/** How many of the latest fires a report names. */
export const LATEST_FIRES = 5;

export type Counted = Pick<VerifyReport, 'database' | 'coverage' | 'doubleRunRows' | 'runs' | 'lateness' | 'latestFires' | 'longestRunSeconds' | 'overlapping'>;

function overlappingPairs(hunts: ReadonlyArray<{ huntId: string; windows: readonly Window[] }>): Counted['overlapping'] {
  const out: Array<{ huntId: string; a: Window; b: Window }> = [];
  for (const h of hunts) {
    for (const [i, a] of h.windows.entries()) {
      for (const b of h.windows.slice(i + 1)) {
        if (out.length < 10 && Math.max(a.start, b.start) < Math.min(a.end, b.end)) out.push({ huntId: h.huntId, a, b });
      }
    }
  }
  return out;
}

export async function countFromTables(handle: ClickHouseHandle, database: string, startNow: number, endNow: number, read: ClickHouseSettings): Promise<Counted> {
  const rows = async <T>(query: string): Promise<T[]> => (await handle.client.query({ query, format: 'JSONEachRow', clickhouse_settings: read })).json<T>();
  type Num = number | string;
  const schedule = await rows<{ hunt_id: string; interval_seconds: Num; phase_offset: Num }>(
    `SELECT hunt_id, interval_seconds, phase_offset FROM ${qualifiedTable(database, TABLES.schedule)} FINAL WHERE enabled = 1`,
  );
  const run = qualifiedTable(database, TABLES.run);
  // Each output row with the moment its run's hunt statement wrote it (server clock): the run had
  // started by then. Not hunt_run's `updated − duration_ms`: that row is written after the commit
  // (watermark, release), whose round trips a loaded or recovering server stretches.
  const out = await rows<{ hunt_id: string; window_start: Num; window_end: Num; run_start: Num }>(
    `SELECT hunt_id, window_start, window_end, toUnixTimestamp64Milli(written) / 1000 AS run_start FROM ${qualifiedTable(database, OUTPUT_TABLE)}`,
  );
  const byHunt = new Map<string, Array<{ start: number; end: number; runStart?: number }>>();
  for (const r of out) {
    const w = { start: Number(r.window_start), end: Number(r.window_end), runStart: Number(r.run_start) };
    byHunt.set(r.hunt_id, [...(byHunt.get(r.hunt_id) ?? []), w]);
  }
  const hunts = schedule.map((s) => ({ huntId: s.hunt_id, intervalSeconds: Number(s.interval_seconds), phaseOffset: Number(s.phase_offset), windows: byHunt.get(s.hunt_id) ?? [] }));
  const cov = coverage(hunts, startNow, endNow);
  const [doubles] = await rows<{ n: Num }>(
    `SELECT count() AS n FROM (SELECT hunt_id, fire FROM ${run} WHERE status = 'succeeded' GROUP BY hunt_id, fire HAVING count() > 1)`,
  );
  const [runs] = await rows<{ ok: Num; failed: Num; longest: Num }>(
    `SELECT countIf(status = 'succeeded') AS ok, countIf(status = 'failed') AS failed, maxIf(duration_ms, status = 'succeeded') AS longest FROM ${run}`,
  );
  const starts = fireStarts(hunts, startNow, endNow);
  const seconds = starts.map((f) => f.seconds);
  return {
    database,
    coverage: cov,
    doubleRunRows: Number(doubles?.n ?? 0),
    runs: { succeeded: Number(runs?.ok ?? 0), failed: Number(runs?.failed ?? 0) },
    lateness: { p50: quantile(seconds, 0.5), p99: quantile(seconds, 0.99), max: seconds.length ? Math.max(...seconds) : undefined },
    latestFires: latestFires(starts, LATEST_FIRES),
    longestRunSeconds: Number(runs?.longest ?? 0) / 1000,
    overlapping: overlappingPairs(hunts),
  };
}

/**
 * Every owed fire once in the output: no fire covered twice, no overlapping windows, no miss.
 * Two succeeded hunt_run rows of one fire (`doubleRunRows`) are a takeover's rerun of the same
 * window, whose rows the dedup token kept once (docs/claim-protocol.md#the-invariant): reported,
 * not a double.
 */
export function exactlyOnce(c: Counted): boolean {
  const cov = c.coverage;
  return cov.owed > 0 && cov.missed === 0 && cov.doubled === 0 && cov.overlaps === 0;
}

/** `(start, end] run at +t s`: when it ran, in the run's seconds, to set beside the faults' times. */
/** Seconds from the race's start, signed: a fire owed at the start can fall just before it (`-1 s`). */
function sinceStart(seconds: number, digits: number): string {
  const text = seconds.toFixed(digits);
  return `${text.startsWith('-') ? '' : '+'}${text} s`;
}

function formatWindow(w: Window, startNow: number): string {
  return `(${w.start}, ${w.end}]${w.runStart === undefined ? '' : ` run at ${sinceStart(w.runStart - startNow, 1)}`}`;
}

/** The report as the CLI prints it, one fact a line. */
export function formatVerifyReport(r: VerifyReport): string {
  const c = r.coverage;
  const s = (v: number | undefined) => (v === undefined ? 'n/a' : `${v.toFixed(2)} s`);
  const where = r.processes ? 'runner processes' : 'runner(s) in one process';
  const faults = r.nemesis?.faults ?? [];
  return [
    `verify-coordination: ${r.runners} ${where}, ${r.hunts} hunts, ${r.seconds} s, claims ${r.claims}, ${r.target}, database ${r.database}${r.kept ? ' (kept)' : ' (dropped)'}`,
    `settings: poll ${r.pollSeconds} s, lease ${r.leaseSeconds} s, cap ${r.cap}; server clock ${r.startNow} → ${r.endNow}`,
    ...(r.nemesis
      ? [
          `nemesis: ${r.nemesis.kinds.join(',')}, seed ${r.nemesis.seed}, ${faults.length} fault(s) injected`,
          ...faults.map((f) => `  +${f.atSeconds.toFixed(1)} s (≈${Math.round(r.startNow + f.atSeconds)}) ${f.kind}${f.target ? ` ${f.target}` : ''} ${f.durationSeconds.toFixed(1)} s: ${f.detail}`),
        ]
      : []),
    `fires: ${c.owed} owed, ${c.ownRun} run as their own fire, ${c.owed - c.ownRun - c.missed} folded into a later run's window`,
    `runs: ${r.runs.succeeded} succeeded, ${r.runs.failed} failed (hunt_run); longest ${s(r.longestRunSeconds)}`,
    `double runs: ${c.doubled} fire(s) covered twice (output rows), ${c.overlaps} pair(s) of overlapping windows`,
    `reruns: ${r.doubleRunRows} window(s) run to success twice after a takeover (same window, output kept once by the dedup token)`,
    `missed fires: ${c.missed} (${c.missed - c.unrun} gap(s) a later run went past, ${c.unrun} still unrun when the drain ended)`,
    `lateness (fire → output written): p50 ${s(r.lateness.p50)}, p99 ${s(r.lateness.p99)}, max ${s(r.lateness.max)}`,
    ...(r.latestFires.length
      ? [`latest fires: ${r.latestFires.map((f) => `${f.huntId}@${sinceStart(f.fire - r.startNow, 0)} run at ${sinceStart(f.runStart - r.startNow, 1)} (${f.seconds.toFixed(2)} s)`).join(', ')}`]
      : []),
    ...(c.examples.length ? [`examples: ${c.examples.join(' ')}`] : []),
    ...r.overlapping.map((o) => `overlap: ${o.huntId} ${formatWindow(o.a, r.startNow)} and ${formatWindow(o.b, r.startNow)}`),
    ...r.unexpectedExits.map((e) => `runner exit: ${e}`),
    ...(r.leaseLogRows === undefined ? [] : [`lease log: ${r.leaseLogRows} row(s) in ${r.database}.${LEASE_LOG_TABLE} (every claim, renewal and release written)`]),
    r.ok ? 'OK: every owed fire ran exactly once' : 'FAILED: a fire ran twice or an owed fire never ran',
    '',
  ].join('\n');
}
