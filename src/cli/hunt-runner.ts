#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { loadConfig, type AppConfig } from '../config/load.js';
import { DfeError } from '../errors.js';
import { createLogger, loggerOptions, type Logger } from '../log.js';
import { applySchemaNow, dueNow, materialiseHunts, requestRunNow, schemaStatements } from '../runner/operations.js';
import { startHuntRunner, type HuntRunnerProcess } from '../runner/start.js';
import { enableHuntNow, SMOOTHING_VERBS, smoothingCommand, type SmoothingVerb } from '../smoothing/control/operator.js';
import { exitWhenDone, invokedDirectly, launch, reportFailure, type FailureStyle, type Program, type Running } from './shell.js';
import { withTelemetry } from '../telemetry/start.js';
import { formatVerifyReport, verifyCoordination } from '../runner/verify-coordination.js';
import { runDoctor } from '../doctor/doctor.js';
import { doctorJson, failed, formatDoctor } from '../doctor/report.js';
import { reapChildren } from '../runner/nemesis/children.js';
import { parseFaultKinds } from '../runner/nemesis/plan.js';

const USAGE = `Usage: dfe-hunt-runner <command> [options]

Commands:
  run                      materialise, then tick every --poll seconds; serves /livez, /readyz, /metrics
  materialise              write hunt_schedule from the hunts directory (diff-aware; a second run writes nothing)
  due [--json]             the hunts due now by the ClickHouse clock (what the shim's backlog counts)
  run-now <hunt_id>        request a run of a hunt now; served after its scheduled fire
  schema [--apply|--print] print (default) or apply the coordination tables' DDL (idempotent)
  doctor [--json] [--as runner|shim]
                           check the configured ClickHouse: version, Keeper and the claim mode, the
                           user's grants, the schema, span log, clock skew, due-query latency,
                           max_execution_time, output-table deduplication; exit 1 on a failing check
  enable <hunt_id>         lift an auto-disable (memory-limit crash-loop or a ceiling)
  verify-coordination --runners N --seconds S [--keep [--lease-log]] [--json]
                           [--nemesis pause,cpu,stall,kill [--seed N]] [--processes] [--lease SECONDS] [--logs DIR]
                           race N runners on hunts firing every second in a scratch database;
                           print fires, double runs, missed fires, lateness; exit 1 on any
                           double or miss; drops the scratch database unless --keep.
                           --nemesis: runners as separate processes, faults injected at seeded
                           random moments (seed printed); --processes: the same without faults;
                           --logs: each runner process's log to DIR/<runner>.log;
                           --lease-log: keep every lease row written in verify_lease_log
  smoothing plan [--json] [--cycles N]
                           simulate N planning cycles on the live schedule and costs; writes nothing
  smoothing apply [--cycles N]
                           the same, then write the moves as learned offsets
  smoothing status [--json]
                           schedule, offset sources, cost model (and its source), disabled hunts, the curve
  smoothing export --hunts DIR
                           write settled learned offsets into the hunt files (schedule.phase_offset)

Options (each overrides its environment variable):
  --hunts DIR              hunt definitions, one *.yaml per hunt   (DFE_HUNTS_DIR, default ./hunts)
  --clickhouse-url URL     ClickHouse HTTP interface               (DFE_CLICKHOUSE_URL)
  --embedded-path DIR      embedded ClickHouse data directory      (DFE_EMBEDDED_PATH, default ./.dfe/clickhouse)
  --embedded-config FILE   ClickHouse config file of the embedded engine (DFE_EMBEDDED_CONFIG_FILE)
  --claims MODE            claim mode: auto, keeper or tables      (DFE_COORDINATION_CLAIMS, default auto)
  --poll SECONDS           seconds between ticks                   (DFE_HUNT_RUNNER_POLL_SECONDS, default 15)
  --cap N                  concurrent runs per runner              (DFE_HUNT_RUNNER_CAP, default 8)
  --metrics-port PORT      /livez, /readyz, /metrics port          (DFE_HUNT_RUNNER_METRICS_PORT, default 9464)
  --metrics-host HOST      listen address of that port             (DFE_HUNT_RUNNER_METRICS_HOST, default 0.0.0.0)
  --bucket-seconds N       smoothing: curve bucket Δ               (DFE_HUNT_SMOOTHING_BUCKET_SECONDS, default 30)
  --max-step FRACTION      smoothing: max step as a fraction of T  (DFE_HUNT_SMOOTHING_MAX_STEP_FRACTION, default 0.25)
  --memory-cap-bytes N     smoothing: M_cap                        (DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES, default: the server's)
  --cpu-cores N            smoothing: cores of C_cap               (DFE_HUNT_SMOOTHING_CPU_CORES, default: the server's)
  --weights CPU,MEM        smoothing: pressure weights             (DFE_HUNT_SMOOTHING_WEIGHTS, default 0.5,0.5)
  --help                   this text
`;

type Flags = Record<string, string | boolean | undefined>;

interface Parsed {
  readonly command: string | undefined;
  readonly rest: string[];
  readonly flags: Flags;
}

function parse(argv: string[]): Parsed {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      hunts: { type: 'string' },
      'clickhouse-url': { type: 'string' },
      'embedded-path': { type: 'string' },
      poll: { type: 'string' },
      cap: { type: 'string' },
      'metrics-port': { type: 'string' },
      'metrics-host': { type: 'string' },
      json: { type: 'boolean' },
      cycles: { type: 'string' },
      'bucket-seconds': { type: 'string' },
      'max-step': { type: 'string' },
      'memory-cap-bytes': { type: 'string' },
      'cpu-cores': { type: 'string' },
      weights: { type: 'string' },
      apply: { type: 'boolean' },
      print: { type: 'boolean' },
      'embedded-config': { type: 'string' },
      claims: { type: 'string' },
      runners: { type: 'string' },
      seconds: { type: 'string' },
      keep: { type: 'boolean' },
      'lease-log': { type: 'boolean' },
      logs: { type: 'string' },
      as: { type: 'string' },
      nemesis: { type: 'string' },
      seed: { type: 'string' },
      processes: { type: 'boolean' },
      lease: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, ...rest] = positionals;
  return { command, rest, flags: values };
}

function stringFlags(flags: Flags): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(flags)) if (typeof value === 'string') out[key] = value;
  return out;
}

/** Logs to stderr, so `due --json` and the summary lines own stdout. */
function stderrLogger(config: AppConfig): Logger {
  if (config.log.format === 'pretty') return createLogger(config.log);
  return pino(loggerOptions(config.log), pino.destination(2));
}

const print = (text: string): void => void process.stdout.write(text);

function needsHuntId(command: string, huntId: string | undefined): string {
  if (!huntId) throw new DfeError('USAGE', `${command} needs a hunt id: dfe-hunt-runner ${command} <hunt_id>`);
  return huntId;
}

async function schemaCommand(config: AppConfig, flags: Flags): Promise<void> {
  if (flags.apply && flags.print) throw new DfeError('USAGE', 'schema takes --apply or --print, not both');
  if (!flags.apply) {
    for (const statement of (await schemaStatements(config)).statements) print(`${statement};\n`);
    return;
  }
  const { kind, count, claims } = await applySchemaNow(config);
  const database = config.clickhouse.dataDatabase;
  print(`schema applied to ${database} (${kind}): ${count} statement(s), each idempotent\n`);
  print(`claims: ${claims.mode}${claims.reason ? ` (KeeperMap unavailable: ${claims.reason})` : ''}, recorded in ${database}.hunt_coordination\n`);
}

async function dueCommand(config: AppConfig, flags: Flags): Promise<void> {
  const due = await dueNow(config);
  if (flags.json) {
    print(`${JSON.stringify(due.map((d) => ({ hunt_id: d.huntId, fire: d.fire, requested: d.requested, server_now: d.serverNow })))}\n`);
    return;
  }
  for (const d of due) {
    print(`${d.huntId}\tfire ${d.fire} (${new Date(d.fire * 1000).toISOString()})\tlate ${d.serverNow - d.fire}s${d.requested ? '\trun-now' : ''}\n`);
  }
  print(`${due.length} hunt(s) due\n`);
}

async function runNowCommand(config: AppConfig, huntId: string): Promise<void> {
  const fire = await requestRunNow(config, huntId);
  print(`requested a run of ${huntId} at fire ${fire} (${new Date(fire * 1000).toISOString()})\n`);
}

async function enableCommand(config: AppConfig, huntId: string): Promise<void> {
  const was = await enableHuntNow(config, huntId);
  if (was === null) print(`${huntId} is not disabled; nothing to do\n`);
  else print(`enabled ${huntId} (was disabled: ${was.reason} at ${was.disabledAt}); it is due again from the next tick\n`);
}

const DEFAULT_CYCLES = 100;

function parseCycles(raw: string | boolean | undefined): number {
  if (typeof raw !== 'string') return DEFAULT_CYCLES;
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new DfeError('USAGE', `invalid --cycles=${JSON.stringify(raw)}: must be a whole number ≥ 1`, { key: 'cycles', value: raw });
  }
  return n;
}

async function smoothingVerbCommand(config: AppConfig, verb: string | undefined, flags: Flags): Promise<void> {
  if (verb === undefined || !(SMOOTHING_VERBS as readonly string[]).includes(verb)) {
    throw new DfeError('USAGE', `smoothing needs one of ${SMOOTHING_VERBS.join(', ')} (got ${JSON.stringify(verb ?? '')})`);
  }
  print(await smoothingCommand(config, verb as SmoothingVerb, { json: flags.json === true, cycles: parseCycles(flags.cycles) }));
}

/**
 * Bounds a stop of `run`: in-flight runs finish and release within it, inside the
 * chart's 60 s terminationGracePeriodSeconds; a run still going past it keeps its
 * lease until the lease expires (docs/claim-protocol.md), so another runner retries the fire.
 */
const RUN_GRACE_MS = 50_000;

/** `run`: materialise, then tick every --poll seconds until SIGTERM/SIGINT. */
function runProgram(flags: Flags, failure: FailureStyle): Program<AppConfig, HuntRunnerProcess> {
  return {
    failure,
    configure: () => loadConfig(process.env, stringFlags(flags)),
    start(config) {
      const log = createLogger(config.log);
      return withTelemetry({ serviceName: 'dfe-hunt-runner', logger: () => log }, () =>
        startHuntRunner({ config, log, serve: { host: config.runner.metricsHost, port: config.runner.metricsPort } }),
      );
    },
    signals: (runner) => ({ logger: runner.logger, graceMs: RUN_GRACE_MS, stoppingMessage: 'stopping: waiting for in-flight runs' }),
  };
}

function wholeCount(flag: string, value: string | boolean | undefined): number {
  const n = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new DfeError('USAGE', `--${flag} must be a whole number ≥ 1, got ${JSON.stringify(value ?? '')}`);
  return n;
}

function wholeOrZero(flag: string, value: string): number {
  const n = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n > 0xffffffff) throw new DfeError('USAGE', `--${flag} must be a whole number 0–4294967295, got ${JSON.stringify(value)}`);
  return n;
}

/**
 * docs/operations.md#verify-coordination: parse, race, print; a double or a miss exits 1.
 * SIGINT/SIGTERM during the race kill every process it started (SIGCONT, then SIGKILL) before
 * this process ends: no runner left stopped, no CPU hog left spinning.
 */
async function verifyCommand(config: AppConfig, flags: Flags): Promise<void> {
  const runners = wholeCount('runners', flags.runners);
  const seconds = wholeCount('seconds', flags.seconds);
  const leaseSeconds = typeof flags.lease === 'string' ? wholeCount('lease', flags.lease) : undefined;
  const kinds = typeof flags.nemesis === 'string' ? parseFaultKinds(flags.nemesis) : undefined;
  if (flags.seed !== undefined && kinds === undefined) throw new DfeError('USAGE', '--seed goes with --nemesis');
  if (flags['lease-log'] === true && flags.keep !== true) throw new DfeError('USAGE', '--lease-log goes with --keep (the log is read from the kept database)');
  const seed = typeof flags.seed === 'string' ? wholeOrZero('seed', flags.seed) : Math.floor(Math.random() * 0xffffffff);
  const onSignal = (sig: NodeJS.Signals) => {
    const n = reapChildren();
    process.stderr.write(`verify-coordination: ${sig}: killed ${n} child process(es); the scratch database may remain (dfe_verify_*)\n`);
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const report = await verifyCoordination({
      config,
      runners,
      seconds,
      keep: flags.keep === true,
      leaseLog: flags['lease-log'] === true,
      ...(typeof flags.logs === 'string' ? { logsDir: flags.logs } : {}),
      processes: flags.processes === true,
      ...(leaseSeconds === undefined ? {} : { leaseSeconds }),
      ...(kinds === undefined ? {} : { nemesis: { kinds, seed } }),
      progress: (line) => void process.stderr.write(`${line}\n`),
    });
    print(flags.json ? `${JSON.stringify(report)}\n` : formatVerifyReport(report));
    if (!report.ok) {
      const c = report.coverage;
      throw new DfeError('CLICKHOUSE_FAILED', `${c.doubled + c.overlaps} double run(s), ${c.missed} missed fire(s) in ${report.database}`);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    reapChildren();
  }
}

/** docs/operations.md#doctor: parse, check, print; a failing check exits 1. */
async function doctorCommand(config: AppConfig, flags: Flags): Promise<void> {
  const role = flags.as ?? 'runner';
  if (role !== 'runner' && role !== 'shim') throw new DfeError('USAGE', `--as must be runner or shim, got ${JSON.stringify(role)}`);
  const report = await runDoctor(config, { role });
  print(flags.json ? doctorJson(report) : formatDoctor(report));
  const failing = failed(report);
  if (failing.length > 0) throw new DfeError('CLICKHOUSE_FAILED', `${failing.length} check(s) failed: ${failing.map((c) => c.name).join(', ')}`);
}

/** The one-shot commands: each ends with exit 0, or throws. */
const COMMANDS: Readonly<Record<string, (config: AppConfig, parsed: Parsed) => Promise<void>>> = {
  materialise: async (config) => print(`${await materialiseHunts(config, stderrLogger(config))}\n`),
  due: (config, { flags }) => dueCommand(config, flags),
  'run-now': (config, { rest }) => runNowCommand(config, needsHuntId('run-now', rest[0])),
  schema: (config, { flags }) => schemaCommand(config, flags),
  enable: (config, { rest }) => enableCommand(config, needsHuntId('enable', rest[0])),
  smoothing: (config, { rest, flags }) => smoothingVerbCommand(config, rest[0], flags),
  'verify-coordination': (config, { flags }) => verifyCommand(config, flags),
  doctor: (config, { flags }) => doctorCommand(config, flags),
};

/** Runs the CLI. Resolves with the running runner (`run`), or the exit code. */
export async function main(argv: string[]): Promise<Running | number> {
  let parsed: Parsed;
  try {
    parsed = parse(argv);
  } catch (err) {
    return reportFailure(err, { prefix: '', usage: USAGE });
  }
  const { command, flags } = parsed;
  if (flags.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !flags.help ? 2 : 0;
  }
  const failure: FailureStyle = { prefix: `dfe-hunt-runner ${command}: `, usage: USAGE, wholeMessage: true };
  if (command === 'run') return launch(runProgram(flags, failure));
  try {
    const config = loadConfig(process.env, stringFlags(flags));
    if (config.notices.length > 0) {
      const log = stderrLogger(config);
      for (const notice of config.notices) log.warn(notice);
    }
    const commandFn = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
    if (commandFn === undefined) throw new DfeError('USAGE', `unknown command ${JSON.stringify(command)}`);
    await commandFn(config, parsed);
    return 0;
  } catch (err) {
    return reportFailure(err, failure);
  }
}

if (invokedDirectly(import.meta.url)) exitWhenDone(main(process.argv.slice(2)), { prefix: 'dfe-hunt-runner: ' });
