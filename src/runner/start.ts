import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import { systemClock, type Clock } from '../clock.js';
import type { AppConfig } from '../config/load.js';
import { silentLogger, type Logger } from '../log.js';
import { serveMetrics, type MetricsServer } from './probe-server.js';
import { createRunnerMetrics, type RunnerMetrics } from './metrics.js';
import type { RunnerEvents, TickRecord } from './fire.js';
import { Runner } from './loop.js';
import type { CycleOutcome } from '../smoothing/control/for-runner.js';
import type { ResolvedTopology } from '../coordination/tables.js';
import { applySchema, resolveTopology } from '../coordination/topology.js';
import type { ClaimMode } from '../coordination/claims/protocol.js';

/**
 * `startRunner`: the hunt runner as a library, for the CLI and the all-in-one
 * demo. It takes an already-open ClickHouse handle (coordination runs on it and
 * it is never closed here), loads the hunts directory (an unreadable directory
 * rejects), and ticks every `poll` seconds until `stop()`.
 */
export interface StartRunnerOptions {
  readonly handle: ClickHouseHandle;
  /** `runner` and `clickhouse` sections are used; hunts dir, poll, cap, lease, settle come from here. */
  readonly config: AppConfig;
  readonly log?: Logger;
  /** Local time: settle, durations, loop pacing. Default: the system clock. */
  readonly clock?: Clock;
  readonly sleep?: (ms: number) => Promise<void>;
  /** `server` (default): coordination uses ClickHouse's clock; `clock`: the injected Clock (tests, simulations). */
  readonly time?: 'server' | 'clock';
  /** Default: DFE_HUNT_RUNNER_ID, else `<hostname>-<pid>-<random>` (unique, so two processes never share leases). */
  readonly runnerId?: string;
  /** Opens a session for hunt statements where the backend needs more than one (handle.statementSessions). Default: the handle's own. */
  readonly openSession?: () => Promise<ClickHouseHandle>;
  readonly events?: RunnerEvents;
  /** Serve /livez, /readyz and /metrics here. Default: not served. */
  readonly serve?: { readonly host: string; readonly port: number };
  /** Tick every `poll` seconds (default true); false leaves ticking to the caller. */
  readonly loop?: boolean;
  /** The topology, when the caller resolved it already (once per process). Default: resolved at the first tick. */
  readonly topology?: ResolvedTopology;
}

export interface RunnerHandle {
  readonly runnerId: string;
  readonly metrics: RunnerMetrics;
  /** Where /metrics is served, when `serve` was given. */
  readonly metricsUrl: string | undefined;
  /** One tick now (tests and tools; the loop calls it on its own). */
  tick(): Promise<TickRecord | undefined>;
  /** The smoothing cycle the last tick started, if any (docs/smoothing.md). */
  lastPlanningCycle(): Promise<CycleOutcome | undefined>;
  /** The claim mode in use (docs/claim-protocol.md#choosing-the-mode), once resolved. */
  claimMode(): ClaimMode | undefined;
  /** Resolves when no run is in flight. */
  idle(): Promise<void>;
  /** Stops ticking, waits for in-flight runs to finish and release, closes what it opened. */
  stop(): Promise<void>;
  /** Stops like a crash: no release, no watermark; leases expire on their own. */
  crash(): void;
}

export function defaultRunnerId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

export async function startRunner(options: StartRunnerOptions): Promise<RunnerHandle> {
  const { handle, config } = options;
  const clock = options.clock ?? systemClock;
  const log = (options.log ?? silentLogger()).child({ component: 'hunt-runner' });
  const runnerId = options.runnerId ?? config.runner.runnerId ?? defaultRunnerId();
  const metrics = createRunnerMetrics();
  const sleep = options.sleep ?? ((ms: number) => delay(ms));
  const sessions = handle.statementSessions(options.openSession);
  const runner = new Runner({
    runnerId,
    client: handle.client,
    clickhouse: config.clickhouse,
    settings: config.runner,
    sessions,
    clock,
    sleep,
    time: options.time ?? 'server',
    metrics,
    log: log.child({ runner: runnerId }),
    events: options.events ?? {},
    ...(options.topology === undefined ? {} : { topology: options.topology }),
  });
  runner.loadHunts();
  await runner.prepare();

  let stopping = false;
  const wake = new AbortController();
  const pollMs = config.runner.pollSeconds * 1000;
  const loop = async (): Promise<void> => {
    while (!stopping) {
      const startedMs = clock.nowMs();
      await runner.tick();
      // ±10 % jitter: runners started together drift apart, so one runner's
      // fresh claims are visible (leased, not due) at the next runner's tick.
      const jitteredMs = pollMs * (0.9 + 0.2 * Math.random());
      const waitMs = Math.max(0, jitteredMs - (clock.nowMs() - startedMs));
      await delay(waitMs, undefined, { signal: wake.signal }).catch(() => undefined);
    }
  };
  // Probes first: a taken metrics port must stop the start, not leave a runner
  // running hunts with no /livez for Kubernetes to see.
  let server: MetricsServer | undefined;
  if (options.serve) {
    server = await serveMetrics(
      metrics.registry,
      {
        live: () => !stopping,
        ready: () => {
          const state = runner.clickhouseState;
          if (state === 'up') return { ready: true, reason: `ready: ${runner.huntCount} hunt(s), claims ${runner.claimMode ?? 'unresolved'}` };
          return { ready: false, reason: state === 'down' ? 'ClickHouse unreachable' : 'no tick yet' };
        },
      },
      options.serve.host,
      options.serve.port,
    ).catch(async (err: unknown) => {
      await sessions.close();
      throw err;
    });
    log.info({ url: server.url }, 'serving /livez, /readyz and /metrics');
  }
  const looping = options.loop === false ? Promise.resolve() : loop();

  let stopped: Promise<void> | undefined;
  return {
    runnerId,
    metrics,
    metricsUrl: server?.url,
    tick: () => runner.tick(),
    lastPlanningCycle: () => runner.lastPlanningCycle(),
    claimMode: () => runner.claimMode,
    idle: () => runner.idle(),
    stop() {
      stopped ??= (async () => {
        stopping = true;
        wake.abort();
        runner.halt();
        // One deadline for all of it (docs/runner.md#stopping): a stalled statement, a planning
        // cycle or a session that will not close must not hold the process.
        let expired = false;
        const deadline = sleep(config.runner.stopDeadlineSeconds * 1000).then(() => (expired = true));
        const within = async (p: Promise<unknown>): Promise<void> => {
          if (!expired) await Promise.race([p, deadline]);
        };
        await within(looping);
        await within(runner.idle());
        const abandoned = runner.inFlightRuns();
        if (abandoned.length > 0) {
          log.warn(
            { runner: runnerId, abandoned, deadline_seconds: config.runner.stopDeadlineSeconds },
            `stop deadline passed: abandoned ${abandoned.map((r) => `${r.huntId}@${r.fire}`).join(', ')}; their leases expire and their windows are retaken as recorded`,
          );
          runner.crash();
        }
        await within(runner.lastPlanningCycle());
        await server?.close();
        await within(sessions.close());
        log.info({ runner: runnerId }, 'runner stopped');
      })();
      return stopped;
    },
    crash() {
      stopping = true;
      wake.abort();
      runner.crash();
      void server?.close();
    },
  };
}

export interface StartHuntRunnerOptions {
  readonly config: AppConfig;
  readonly log: Logger;
  /** Where /livez, /readyz and /metrics listen. */
  readonly serve: { readonly host: string; readonly port: number };
}

/** `dfe-hunt-runner run`: a runner that owns its ClickHouse client. */
export interface HuntRunnerProcess extends RunnerHandle {
  /** Where ClickHouse is (a URL without credentials, or the embedded data directory). */
  readonly target: string;
  /** The logger it was given. */
  readonly logger: Logger;
  /** Stops the runner (in-flight runs finish and release), then closes ClickHouse. */
  close(): Promise<void>;
}

/**
 * Opens ClickHouse, resolves the topology once and applies the coordination
 * schema (a runner user may lack CREATE rights: then the chart's Job applied
 * it, and a warning says so), then starts the runner with its probes. A start
 * that fails closes what it opened.
 */
export async function startHuntRunner(options: StartHuntRunnerOptions): Promise<HuntRunnerProcess> {
  const { config, log } = options;
  const handle = await openClickHouse(config.clickhouse);
  let topology: ResolvedTopology | undefined;
  try {
    topology = await resolveTopology(handle.client, config.clickhouse);
    await applySchema(handle.client, config.clickhouse.dataDatabase, topology, config.clickhouse);
  } catch (err) {
    log.warn({ err }, 'could not apply the schema; assuming it exists');
  }
  let runner: RunnerHandle;
  try {
    runner = await startRunner({ handle, config, log, serve: options.serve, ...(topology === undefined ? {} : { topology }) });
  } catch (err) {
    await handle.close();
    throw err;
  }
  log.info({ runner: runner.runnerId, target: handle.target, metrics: runner.metricsUrl, claims: runner.claimMode() }, 'hunt runner started');
  let closed: Promise<void> | undefined;
  return {
    ...runner,
    target: handle.target,
    logger: log,
    close: () => (closed ??= runner.stop().then(() => handle.close())),
  };
}
