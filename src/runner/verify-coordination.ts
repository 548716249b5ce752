import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import { qualifiedTable, quoteDatabase } from '../clickhouse/identifiers.js';
import type { AppConfig } from '../config/load.js';
import { silentLogger, type Logger } from '../log.js';
import { resolveClaimMode } from '../coordination/claims/mode.js';
import { TABLES } from '../coordination/tables.js';
import { applySchema, coordinationSettings, resolveTopology } from '../coordination/topology.js';
import type { ClickHouseSettings } from '@clickhouse/client';
import { DfeError } from '../errors.js';
import { reapChildren } from './nemesis/children.js';
import type { FaultKind } from './nemesis/plan.js';
import { startInProcess, startProcesses, type Race } from './verify-races.js';
import { countFromTables, countLeaseLog, exactlyOnce, LEASE_LOG_TABLE, OUTPUT_TABLE as OUTPUT, type VerifyReport } from './verify-report.js';

export { formatVerifyReport, type VerifyReport } from './verify-report.js';

/**
 * `dfe-hunt-runner verify-coordination` (docs/operations.md#verify-coordination): N runners
 * race hunts that fire every second in a scratch database of the configured ClickHouse; then
 * every owed fire is counted from the tables — the hunts' output rows and hunt_run, never the
 * runners' counters (verify-report.ts). The runners run in this process, each on its own
 * connections, or — with `processes`, which `nemesis` implies — as separate `dfe-hunt-runner
 * run` processes (nemesis/process-race.ts) on which the nemesis injects its faults
 * (nemesis/inject.ts). The race tests drive the same function.
 */
export interface VerifyOptions {
  readonly config: AppConfig;
  readonly runners: number;
  readonly seconds: number;
  /** Keep the scratch database (default: dropped). */
  readonly keep?: boolean;
  /**
   * Keep a copy of every lease row the runners write (`verify_lease_log`, never merged away), so
   * a kept database shows each claim, renewal and release of the table protocol.
   */
  readonly leaseLog?: boolean;
  /** Runner processes only: write each one's log to `<logsDir>/<runner id>.log` (created). */
  readonly logsDir?: string;
  readonly hunts?: number;
  /** Hunt intervals, seconds, used round-robin (default: every hunt every second). */
  readonly intervals?: readonly number[];
  /** In-process runners only: kill runner 0 like a crash (aborted: no release, no watermark) `atSeconds` in, start a new one `restartAfterSeconds` later. */
  readonly kill?: { readonly atSeconds: number; readonly restartAfterSeconds: number };
  /** The runners' lease, seconds (default: the configured one, at most 30). */
  readonly leaseSeconds?: number;
  /** Runners as separate `dfe-hunt-runner run` processes (default false; `nemesis` implies it). */
  readonly processes?: boolean;
  /** Faults injected on the runner processes, at seeded random moments (nemesis/plan.ts). */
  readonly nemesis?: { readonly kinds: readonly FaultKind[]; readonly seed: number };
  /** The compiled `dfe-hunt-runner` entry the runner processes run (default: this build's). */
  readonly runnerEntry?: string;
  readonly log?: Logger;
  /** Progress lines (the CLI prints them to stderr). */
  readonly progress?: (line: string) => void;
}

function huntYaml(database: string, huntId: string, interval: number): string {
  const insert =
    `INSERT INTO ${qualifiedTable(database, OUTPUT)} (hunt_id, fire, window_start, window_end) ` +
    `SELECT '${huntId}', {window_end:Int64}, {window_start:Int64}, {window_end:Int64}`;
  return [`schedule: {mode: rate, interval: ${interval}}`, 'queries:', `  - ${JSON.stringify(insert)}`, ''].join('\n');
}

/** The compiled CLI beside this module (dist/src/cli/hunt-runner.js). */
function defaultRunnerEntry(): string {
  const entry = fileURLToPath(new URL('../cli/hunt-runner.js', import.meta.url));
  if (!existsSync(entry)) throw new DfeError('USAGE', `runner processes need the compiled CLI, not found at ${entry} (npm run build)`);
  return entry;
}

export async function verifyCoordination(options: VerifyOptions): Promise<VerifyReport> {
  const log = options.log ?? silentLogger();
  const progress = options.progress ?? (() => undefined);
  const processes = options.processes === true || options.nemesis !== undefined;
  const kinds = options.nemesis?.kinds ?? [];
  const entry = processes ? (options.runnerEntry ?? defaultRunnerEntry()) : '';
  const database = `dfe_verify_${randomBytes(4).toString('hex')}`;
  const huntCount = options.hunts ?? 20;
  const intervals = options.intervals ?? [1];
  const base = options.config;
  if (kinds.includes('stall') && base.clickhouse.backend === 'server' && !(base.clickhouse.url ?? '').startsWith('http:')) {
    throw new DfeError('USAGE', '--nemesis stall needs a plain http:// ClickHouse URL: its proxy forwards TCP and cannot stand before TLS', { key: 'nemesis', value: kinds.join(',') });
  }
  const huntsDir = mkdtempSync(join(tmpdir(), 'dfe-verify-hunts-'));
  // Hunts fire every second: poll twice a second, and a lease of at most 30 s so a killed
  // runner's (or a late claim's) hold clears within a short wait. Settle, cap and mode as configured.
  const leaseSeconds = options.leaseSeconds ?? Math.min(base.runner.leaseSeconds, 30);
  const config: AppConfig = {
    ...base,
    clickhouse: { ...base.clickhouse, dataDatabase: database },
    runner: {
      ...base.runner,
      huntsDir,
      pollSeconds: Math.min(base.runner.pollSeconds, 0.5),
      leaseSeconds,
      // Scratch hunts are no fleet to plan: the smoothing controller stays off, so only claims race.
      smoothing: { ...base.runner.smoothing, mode: 'off' as const },
    },
  };
  const handle = await openClickHouse(config.clickhouse);
  let race: Race | undefined;
  try {
    const topology = await resolveTopology(handle.client, config.clickhouse);
    await applySchema(handle.client, database, topology, config.clickhouse);
    const settings = coordinationSettings(topology);
    if (options.leaseLog) await createLeaseLog(handle.client, database);
    const mode = await resolveClaimMode(handle.client, database, topology, config.runner.claims, settings);
    await handle.client.command({
      query: `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, OUTPUT)} (hunt_id String, fire Int64, window_start Int64, window_end Int64, written DateTime64(3) DEFAULT now64(3)) ENGINE = MergeTree ORDER BY (hunt_id, fire) SETTINGS non_replicated_deduplication_window = 10000`,
    });
    for (let i = 0; i < huntCount; i += 1) {
      const id = `v${String(i).padStart(3, '0')}`;
      writeFileSync(join(huntsDir, `${id}.yaml`), huntYaml(database, id, intervals[i % intervals.length] ?? 1));
    }
    const serverNow = async (): Promise<number> => {
      const rs = await handle.client.query({ query: 'SELECT toInt64(toUnixTimestamp(now())) AS now', format: 'JSONEachRow' });
      return Number((await rs.json<{ now: number | string }>())[0]?.now);
    };
    const where = processes ? 'runner processes' : 'runner(s)';
    if (processes) {
      const seed = options.nemesis?.seed ?? 0;
      if (options.logsDir !== undefined) mkdirSync(options.logsDir, { recursive: true });
      race = await startProcesses({ config, handle, claims: mode.mode, runners: options.runners, entry, progress, seconds: options.seconds, kinds, seed, ...(options.logsDir === undefined ? {} : { logsDir: options.logsDir }) });
    } else {
      race = await startInProcess({ config, topology, log, progress, runners: options.runners, ...(options.kill ? { kill: options.kill } : {}) });
    }
    const startNow = await serverNow();
    const startedMs = race.startedMs;
    progress(`${options.runners} ${where}, ${huntCount} hunts, claims ${mode.mode} (${mode.source}), lease ${leaseSeconds} s, database ${database}: running ${options.seconds} s`);
    await delay(Math.max(0, options.seconds * 1000 - (Date.now() - startedMs)));
    const endNow = await serverNow();
    // Every fault ends (a pause is continued, a killed runner restarted) before the drain.
    const faults = await race.faults;
    progress(`ran ${((Date.now() - startedMs) / 1000).toFixed(0)} s; waiting until every fire up to the end is covered`);
    await drain(handle, database, endNow, Math.max(60, 4 * leaseSeconds), settings.read);
    progress('stopping the runners');
    await race.stop();
    progress('counting from the tables');
    const counted = await countFromTables(handle, database, startNow, endNow, settings.read);
    const leaseLogRows = options.leaseLog ? await countLeaseLog(handle, database, settings.read) : undefined;
    return {
      ...counted,
      ...(leaseLogRows === undefined ? {} : { leaseLogRows }),
      target: handle.target,
      claims: mode.mode,
      runners: options.runners,
      processes,
      hunts: huntCount,
      seconds: options.seconds,
      startNow,
      endNow,
      pollSeconds: config.runner.pollSeconds,
      leaseSeconds,
      cap: config.runner.cap,
      ...(options.nemesis ? { nemesis: { seed: options.nemesis.seed, kinds, faults } } : {}),
      unexpectedExits: race.unexpectedExits(),
      kept: options.keep === true,
      ok: exactlyOnce(counted),
    };
  } finally {
    await race?.stop().catch(() => undefined);
    reapChildren();
    rmSync(huntsDir, { recursive: true, force: true });
    if (!options.keep) await handle.client.command({ query: `DROP DATABASE IF EXISTS ${quoteDatabase(database)} SYNC` }).catch(() => undefined);
    await handle.close();
  }
}

/** The scratch copy of every hunt_lease row written (VerifyOptions.leaseLog), by a materialized view. */
async function createLeaseLog(client: ClickHouseHandle['client'], database: string): Promise<void> {
  const log = qualifiedTable(database, LEASE_LOG_TABLE);
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS ${log} (hunt_id String, owner String, fire Int64, lease_until Int64, claimed DateTime64(3), logged DateTime64(3) DEFAULT now64(3)) ENGINE = MergeTree ORDER BY (hunt_id, claimed)`,
  });
  await client.command({
    query: `CREATE MATERIALIZED VIEW IF NOT EXISTS ${qualifiedTable(database, `${LEASE_LOG_TABLE}_mv`)} TO ${log} AS SELECT hunt_id, owner, fire, lease_until, claimed FROM ${qualifiedTable(database, TABLES.lease)}`,
  });
}

/** Waits until every fire up to `endNow` is covered (a killed runner's lease must expire first), at most `seconds`. */
async function drain(handle: ClickHouseHandle, database: string, endNow: number, seconds: number, read: ClickHouseSettings): Promise<void> {
  const watermark = qualifiedTable(database, TABLES.watermark);
  const schedule = qualifiedTable(database, TABLES.schedule);
  const untilMs = Date.now() + seconds * 1000;
  while (Date.now() < untilMs) {
    const rs = await handle.client.query({
      query: `SELECT count() AS behind FROM ${schedule} AS s FINAL LEFT JOIN (SELECT hunt_id, max(watermark) AS wm FROM ${watermark} GROUP BY hunt_id) AS w ON w.hunt_id = s.hunt_id
              WHERE s.enabled = 1 AND ifNull(w.wm, 0) < intDiv({end:Int64} - s.phase_offset, s.interval_seconds) * s.interval_seconds + s.phase_offset`,
      query_params: { end: endNow },
      format: 'JSONEachRow',
      clickhouse_settings: read,
    });
    if (Number((await rs.json<{ behind: number | string }>())[0]?.behind) === 0) return;
    await delay(250);
  }
}
