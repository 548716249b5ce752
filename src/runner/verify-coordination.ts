import type { ClickHouseSettings } from '@clickhouse/client';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import { qualifiedTable, quoteDatabase } from '../clickhouse/identifiers.js';
import type { AppConfig } from '../config/load.js';
import { silentLogger, type Logger } from '../log.js';
import { resolveClaimMode } from '../coordination/claims/mode.js';
import type { ClaimMode } from '../coordination/claims/protocol.js';
import { TABLES } from '../coordination/tables.js';
import { applySchema, coordinationSettings, resolveTopology } from '../coordination/topology.js';
import { coverage, quantile, type Coverage } from './coverage.js';
import { startRunner, type RunnerHandle } from './start.js';
import type { RunnerEvents } from './fire.js';

/**
 * `dfe-hunt-runner verify-coordination` (docs/operations.md#verify-coordination): N runners
 * in this process, each on its own ClickHouse connections, race hunts that fire every
 * second in a scratch database of the configured ClickHouse; then every owed fire is
 * counted from the tables — the hunts' output rows and hunt_run, never the runners'
 * counters. The race test drives the same function with a runner killed and restarted.
 */
export interface VerifyOptions {
  readonly config: AppConfig;
  readonly runners: number;
  readonly seconds: number;
  /** Keep the scratch database (default: dropped). */
  readonly keep?: boolean;
  readonly hunts?: number;
  /** Hunt intervals, seconds, used round-robin (default: every hunt every second). */
  readonly intervals?: readonly number[];
  /** Kill runner 0 like a crash (aborted: no release, no watermark) `atSeconds` in, start a new one `restartAfterSeconds` later. */
  readonly kill?: { readonly atSeconds: number; readonly restartAfterSeconds: number };
  readonly log?: Logger;
  /** Progress lines (the CLI prints them to stderr). */
  readonly progress?: (line: string) => void;
}

export interface VerifyReport {
  readonly database: string;
  readonly target: string;
  readonly claims: ClaimMode;
  readonly runners: number;
  readonly hunts: number;
  readonly seconds: number;
  readonly coverage: Coverage;
  /** (hunt, fire) pairs with more than one `succeeded` row in hunt_run. */
  readonly doubleRunRows: number;
  readonly runs: { readonly succeeded: number; readonly failed: number };
  /** Seconds from a fire to the start of its run (hunt_run.updated − duration − fire). */
  readonly claimLatency: { readonly p50: number | undefined; readonly p99: number | undefined };
  readonly kept: boolean;
  readonly ok: boolean;
}

const OUTPUT = 'verify_out';

function huntYaml(database: string, huntId: string, interval: number): string {
  const insert =
    `INSERT INTO ${qualifiedTable(database, OUTPUT)} (hunt_id, fire, window_start, window_end) ` +
    `SELECT '${huntId}', {window_end:Int64}, {window_start:Int64}, {window_end:Int64}`;
  return [`schedule: {mode: rate, interval: ${interval}}`, 'queries:', `  - ${JSON.stringify(insert)}`, ''].join('\n');
}

export async function verifyCoordination(options: VerifyOptions): Promise<VerifyReport> {
  const log = options.log ?? silentLogger();
  const progress = options.progress ?? (() => undefined);
  const database = `dfe_verify_${randomBytes(4).toString('hex')}`;
  const huntCount = options.hunts ?? 20;
  const intervals = options.intervals ?? [1];
  const base = options.config;
  const huntsDir = mkdtempSync(join(tmpdir(), 'dfe-verify-hunts-'));
  // Hunts fire every second: poll twice a second, and a lease of at most 30 s so a killed
  // runner's (or a late claim's) hold clears within a short wait. Settle, cap and mode as configured.
  const config: AppConfig = {
    ...base,
    clickhouse: { ...base.clickhouse, dataDatabase: database },
    runner: { ...base.runner, huntsDir, pollSeconds: Math.min(base.runner.pollSeconds, 0.5), leaseSeconds: Math.min(base.runner.leaseSeconds, 30) },
  };
  const handle = await openClickHouse(config.clickhouse);
  const handles: ClickHouseHandle[] = [];
  const runners: RunnerHandle[] = [];
  try {
    const topology = await resolveTopology(handle.client, config.clickhouse);
    await applySchema(handle.client, database, topology, { runRetentionDays: config.clickhouse.runRetentionDays });
    const settings = coordinationSettings(topology);
    const mode = await resolveClaimMode(handle.client, database, topology, config.runner.claims, settings);
    await handle.client.command({
      query: `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, OUTPUT)} (hunt_id String, fire Int64, window_start Int64, window_end Int64) ENGINE = MergeTree ORDER BY (hunt_id, fire)`,
    });
    for (let i = 0; i < huntCount; i += 1) {
      const id = `v${String(i).padStart(3, '0')}`;
      writeFileSync(join(huntsDir, `${id}.yaml`), huntYaml(database, id, intervals[i % intervals.length] ?? 1));
    }
    const serverNow = async (): Promise<number> => {
      const rs = await handle.client.query({ query: 'SELECT toInt64(toUnixTimestamp(now())) AS now', format: 'JSONEachRow' });
      return Number((await rs.json<{ now: number | string }>())[0]?.now);
    };
    // The kill lands in the victim's statement hook, before a statement is sent and while none
    // of its runs has sent one: a runner killed with an output INSERT in flight (or written but
    // not yet watermarked) would run that window again — the one case docs/claim-protocol.md
    // leaves to the dedup token, which a plain MergeTree output table does not have. So the
    // victim runs one fire at a time (cap 1): its claims still race, and its next statement
    // hook after the arming finds none of its INSERTs in flight.
    const writing = new Set<string>();
    let armed: (() => void) | undefined;
    const victimEvents: RunnerEvents = {
      statement: (e) => {
        if (armed && writing.size === 0) armed();
        else writing.add(`${e.huntId}@${e.fire}`);
      },
      run: (e) => writing.delete(`${e.huntId}@${e.fire}`),
    };
    const start = async (id: string, events?: RunnerEvents): Promise<RunnerHandle> => {
      const own = await openClickHouse(config.clickhouse);
      handles.push(own);
      // Scratch hunts are no fleet to plan: the smoothing controller stays off, so only claims race.
      const runner = { ...config.runner, smoothing: { ...config.runner.smoothing, mode: 'off' as const } };
      const ownConfig = { ...config, runner: events ? { ...runner, cap: 1 } : runner };
      return startRunner({ handle: own, config: ownConfig, log, runnerId: id, topology, ...(events ? { events } : {}) });
    };
    for (let i = 0; i < options.runners; i += 1) runners.push(await start(`verify-${i}`, i === 0 && options.kill ? victimEvents : undefined));
    const startNow = await serverNow();
    progress(`${options.runners} runner(s), ${huntCount} hunts, claims ${mode.mode} (${mode.source}), database ${database}: running ${options.seconds} s`);

    const startedMs = Date.now();
    if (options.kill && options.runners > 0) {
      await delay(options.kill.atSeconds * 1000);
      const victim = runners[0];
      // Armed now; fired by the victim's next statement hook, or after 10 s regardless.
      const killed = new Promise<void>((resolve) => {
        armed = () => {
          armed = undefined;
          victim?.crash();
          resolve();
        };
      });
      await Promise.race([killed, delay(10_000).then(() => armed?.())]);
      // Its connections stay open, as a dead pod's sockets linger: closing an embedded
      // connection under queries still queued on it would stall chdb's parameter queue.
      progress(`killed ${victim?.runnerId ?? 'runner 0'} ${((Date.now() - startedMs) / 1000).toFixed(1)} s in`);
      await delay(options.kill.restartAfterSeconds * 1000);
      runners[0] = await start('verify-0-restarted');
      progress('restarted it as verify-0-restarted');
    }
    await delay(Math.max(0, options.seconds * 1000 - (Date.now() - startedMs)));
    const endNow = await serverNow();
    progress(`ran ${((Date.now() - startedMs) / 1000).toFixed(0)} s; waiting until every fire up to the end is covered`);

    // Drain: every fire up to endNow must be covered (a killed runner's lease must expire first).
    const drainSeconds = Math.max(30, 2 * config.runner.leaseSeconds);
    const watermark = qualifiedTable(database, TABLES.watermark);
    const schedule = qualifiedTable(database, TABLES.schedule);
    const drainUntilMs = Date.now() + drainSeconds * 1000;
    while (Date.now() < drainUntilMs) {
      const rs = await handle.client.query({
        query: `SELECT count() AS behind FROM ${schedule} AS s FINAL LEFT JOIN (SELECT hunt_id, max(watermark) AS wm FROM ${watermark} GROUP BY hunt_id) AS w ON w.hunt_id = s.hunt_id
                WHERE s.enabled = 1 AND ifNull(w.wm, 0) < intDiv({end:Int64} - s.phase_offset, s.interval_seconds) * s.interval_seconds + s.phase_offset`,
        query_params: { end: endNow },
        format: 'JSONEachRow',
        clickhouse_settings: settings.read,
      });
      if (Number((await rs.json<{ behind: number | string }>())[0]?.behind) === 0) break;
      await delay(250);
    }
    progress('stopping the runners');
    await Promise.all(runners.map((r) => r.stop()));
    progress('counting from the tables');
    return { ...(await countFromTables(handle, database, startNow, endNow, settings.read)), claims: mode.mode, runners: options.runners, hunts: huntCount, seconds: options.seconds, kept: options.keep === true, target: handle.target };
  } finally {
    for (const r of runners) await r.stop().catch(() => undefined);
    for (const h of handles) await h.close().catch(() => undefined);
    rmSync(huntsDir, { recursive: true, force: true });
    if (!options.keep) await handle.client.command({ query: `DROP DATABASE IF EXISTS ${quoteDatabase(database)} SYNC` }).catch(() => undefined);
    await handle.close();
  }
}

type Counted = Omit<VerifyReport, 'claims' | 'runners' | 'hunts' | 'seconds' | 'kept' | 'target'>;

async function countFromTables(handle: ClickHouseHandle, database: string, startNow: number, endNow: number, read: ClickHouseSettings): Promise<Counted> {
  const rows = async <T>(query: string): Promise<T[]> => (await handle.client.query({ query, format: 'JSONEachRow', clickhouse_settings: read })).json<T>();
  type Num = number | string;
  const schedule = await rows<{ hunt_id: string; interval_seconds: Num; phase_offset: Num }>(
    `SELECT hunt_id, interval_seconds, phase_offset FROM ${qualifiedTable(database, TABLES.schedule)} FINAL WHERE enabled = 1`,
  );
  const out = await rows<{ hunt_id: string; window_start: Num; window_end: Num }>(`SELECT hunt_id, window_start, window_end FROM ${qualifiedTable(database, OUTPUT)}`);
  const byHunt = new Map<string, Array<{ start: number; end: number }>>();
  for (const r of out) byHunt.set(r.hunt_id, [...(byHunt.get(r.hunt_id) ?? []), { start: Number(r.window_start), end: Number(r.window_end) }]);
  const cov = coverage(
    schedule.map((s) => ({ huntId: s.hunt_id, intervalSeconds: Number(s.interval_seconds), phaseOffset: Number(s.phase_offset), windows: byHunt.get(s.hunt_id) ?? [] })),
    startNow,
    endNow,
  );
  const run = qualifiedTable(database, TABLES.run);
  const [doubles] = await rows<{ n: Num }>(
    `SELECT count() AS n FROM (SELECT hunt_id, fire FROM ${run} WHERE status = 'succeeded' GROUP BY hunt_id, fire HAVING count() > 1)`,
  );
  const [runs] = await rows<{ ok: Num; failed: Num }>(`SELECT countIf(status = 'succeeded') AS ok, countIf(status = 'failed') AS failed FROM ${run}`);
  const latencies = await rows<{ s: Num }>(
    `SELECT (toUnixTimestamp64Milli(updated) - duration_ms) / 1000 - fire AS s FROM ${run} WHERE status = 'succeeded'`,
  );
  const seconds = latencies.map((l) => Math.max(0, Number(l.s)));
  const doubleRunRows = Number(doubles?.n ?? 0);
  return {
    database,
    coverage: cov,
    doubleRunRows,
    runs: { succeeded: Number(runs?.ok ?? 0), failed: Number(runs?.failed ?? 0) },
    claimLatency: { p50: quantile(seconds, 0.5), p99: quantile(seconds, 0.99) },
    ok: cov.missed === 0 && cov.doubled === 0 && doubleRunRows === 0 && schedule.length > 0 && cov.owed > 0,
  };
}

/** The report as the CLI prints it, one fact a line. */
export function formatVerifyReport(r: VerifyReport): string {
  const c = r.coverage;
  const s = (v: number | undefined) => (v === undefined ? 'n/a' : `${v.toFixed(2)} s`);
  return [
    `verify-coordination: ${r.runners} runner(s), ${r.hunts} hunts, ${r.seconds} s, claims ${r.claims}, ${r.target}, database ${r.database}${r.kept ? ' (kept)' : ' (dropped)'}`,
    `fires: ${c.owed} owed, ${c.ownRun} run as their own fire, ${c.owed - c.ownRun - c.missed} folded into a later run's window`,
    `runs: ${r.runs.succeeded} succeeded, ${r.runs.failed} failed (hunt_run)`,
    `double runs: ${c.doubled} fire(s) covered twice (output rows), ${r.doubleRunRows} fire(s) with two succeeded hunt_run rows`,
    `missed fires: ${c.missed}`,
    `claim latency (fire → run start): p50 ${s(r.claimLatency.p50)}, p99 ${s(r.claimLatency.p99)}`,
    ...(c.examples.length ? [`examples: ${c.examples.join(' ')}`] : []),
    r.ok ? 'OK: every owed fire ran exactly once' : 'FAILED: a fire ran twice or an owed fire never ran',
    '',
  ].join('\n');
}
