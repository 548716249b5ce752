import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { startEngineFront, type EngineFront } from '../../clickhouse/http-front.js';
import type { ClickHouseHandle } from '../../clickhouse/client.js';
import type { AppConfig } from '../../config/load.js';
import type { ClaimMode } from '../../coordination/claims/protocol.js';
import { exited, signal, spawnChild, stopChild } from './children.js';
import { startStallProxy, type StallProxy } from './stall-proxy.js';

/**
 * The runners of `verify-coordination --nemesis` as a fleet is: each a real
 * `dfe-hunt-runner run` process of its own, in SERVER mode, its ClickHouse reached through a
 * stall proxy (stall-proxy.ts). On a server the proxy stands before its HTTP interface; on the
 * embedded engine (one process per data directory) the verify process serves its engine
 * through an HTTP front (clickhouse/http-front.ts) and the proxy stands before that — so the
 * table protocol's claims race with no process-wide gate, as on a server.
 */
export interface ProcessRaceOptions {
  readonly config: AppConfig;
  /** The verify process's own connection: served by the front on the embedded engine. */
  readonly handle: ClickHouseHandle;
  readonly claims: ClaimMode;
  readonly runners: number;
  /** The compiled `dfe-hunt-runner` entry. */
  readonly entry: string;
  readonly progress: (line: string) => void;
  /** A directory for each runner process's log (stdout and stderr, `<runner id>.log`); default: none kept. */
  readonly logsDir?: string;
}

/** Started: every runner process answered /readyz (or was given a minute to). */
export interface ProcessRace {
  /** Where the runners send their queries (the proxy, or the server when it cannot stand before it). */
  readonly url: string;
  readonly canStall: boolean;
  /** Runner slots: index → its current process id (`verify-<i>` or `verify-<i>-<restart>`). */
  runnerIds(): readonly string[];
  pause(index: number): void;
  resume(index: number): void;
  /** SIGKILL, resolved once it exited. */
  kill(index: number): Promise<void>;
  /** A new process in the slot; resolves once it is ready (or could not be within a minute). */
  restart(index: number): Promise<void>;
  stall(ms: number): void;
  /** Runner processes that ended on their own (not by the nemesis), with their stderr's tail. */
  unexpectedExits(): readonly string[];
  /** SIGTERM each runner (SIGKILL after `graceMs`), then close the proxy and the front. */
  stop(graceMs: number): Promise<void>;
}

interface Slot {
  id: string;
  child: ChildProcess;
  metricsPort: number;
  restarts: number;
  expectedExit: boolean;
  stderrTail: string;
}

/**
 * Resolves once the runner answers /readyz with 200 (it has ticked), or after `timeoutMs`, or
 * when it exits. A fault lands only on a ready runner: one stopped inside its start-up (the
 * KeeperMap probe) tests the probe, not the claims.
 */
async function whenReady(child: ChildProcess, port: number, timeoutMs: number): Promise<boolean> {
  const untilMs = Date.now() + timeoutMs;
  while (Date.now() < untilMs && child.exitCode === null && child.signalCode === null) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return true;
    await delay(200);
  }
  return false;
}

async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/** The child's environment: the caller's, minus its ClickHouse location, plus the race's settings. */
export function runnerEnv(base: NodeJS.ProcessEnv, config: AppConfig, url: string, claims: ClaimMode, runnerId: string, metricsPort: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  const dropped = /^DFE_(CLICKHOUSE_(URL|HOST|PORT|SECURE|BACKEND)|EMBEDDED_)/;
  for (const [key, value] of Object.entries(base)) if (!dropped.test(key)) env[key] = value;
  const { clickhouse, runner } = config;
  return {
    ...env,
    LOG_LEVEL: base.LOG_LEVEL ?? 'warn',
    DFE_CLICKHOUSE_BACKEND: 'server',
    DFE_CLICKHOUSE_URL: url,
    DFE_CLICKHOUSE_USERNAME: clickhouse.username,
    DFE_CLICKHOUSE_PASSWORD: clickhouse.password,
    DFE_CLICKHOUSE_DATA_DATABASE: clickhouse.dataDatabase,
    DFE_HUNTS_DIR: runner.huntsDir,
    DFE_HUNT_RUNNER_POLL_SECONDS: String(runner.pollSeconds),
    DFE_HUNT_RUNNER_LEASE_SECONDS: String(runner.leaseSeconds),
    DFE_HUNT_RUNNER_SETTLE_MS: String(runner.settleMs),
    DFE_HUNT_RUNNER_CAP: String(runner.cap),
    DFE_HUNT_RUNNER_ID: runnerId,
    DFE_HUNT_RUNNER_METRICS_HOST: '127.0.0.1',
    DFE_HUNT_RUNNER_METRICS_PORT: String(metricsPort),
    DFE_COORDINATION_CLAIMS: claims,
    // Scratch hunts are no fleet to plan: only claims race.
    DFE_HUNT_SMOOTHING: 'off',
  };
}

const READY_TIMEOUT_MS = 60_000;

export async function startProcessRace(options: ProcessRaceOptions): Promise<ProcessRace> {
  const { config, progress } = options;
  let front: EngineFront | undefined;
  let proxy: StallProxy | undefined;
  const slots: Slot[] = [];
  const exits: string[] = [];
  try {
    let upstream = config.clickhouse.url;
    if (config.clickhouse.backend === 'embedded') {
      front = await startEngineFront(options.handle, { pooled: true });
      upstream = front.url;
    }
    const target = new URL(upstream ?? '');
    if (target.protocol === 'http:') proxy = await startStallProxy(target);
    const url = proxy?.url ?? target.toString().replace(/\/$/, '');

    const logTo = options.logsDir === undefined ? undefined : (id: string) => join(options.logsDir ?? '', `${id}.log`);
    const spawnRunner = async (slot: number, id: string): Promise<{ child: ChildProcess; metricsPort: number }> => {
      const metricsPort = await freeLoopbackPort();
      const env = runnerEnv(process.env, config, url, options.claims, id, metricsPort);
      const child = spawnChild(process.execPath, [options.entry, 'run'], { env, stdio: ['ignore', logTo ? 'pipe' : 'ignore', 'pipe'] });
      if (logTo) child.stdout?.on('data', (b: Buffer) => appendFileSync(logTo(id), b));
      child.stderr?.on('data', (b: Buffer) => {
        const s = slots[slot];
        if (s?.child === child) s.stderrTail = (s.stderrTail + b.toString()).slice(-2000);
        if (logTo) appendFileSync(logTo(id), b);
      });
      child.once('exit', (code, sig) => {
        const s = slots[slot];
        if (s?.child === child && !s.expectedExit) {
          exits.push(`${id} exited on its own (code ${code ?? 'none'}, signal ${sig ?? 'none'}): ${s.stderrTail.trim().split('\n').slice(-3).join(' | ')}`);
          progress(`runner ${id} exited on its own (code ${code ?? 'none'}, signal ${sig ?? 'none'})`);
        }
      });
      return { child, metricsPort };
    };
    for (let i = 0; i < options.runners; i += 1) {
      const id = `verify-${i}`;
      slots.push({ id, ...(await spawnRunner(i, id)), restarts: 0, expectedExit: false, stderrTail: '' });
    }
    const ready = await Promise.all(slots.map((s) => whenReady(s.child, s.metricsPort, READY_TIMEOUT_MS)));
    const notReady = slots.filter((_, i) => !ready[i]).map((s) => s.id);
    if (notReady.length > 0) progress(`not ready within ${READY_TIMEOUT_MS / 1000} s: ${notReady.join(', ')}`);
    const slotAt = (i: number): Slot => {
      const s = slots[i];
      if (!s) throw new Error(`no runner slot ${i}`);
      return s;
    };
    return {
      url,
      canStall: proxy !== undefined,
      runnerIds: () => slots.map((s) => s.id),
      pause: (i) => void signal(slotAt(i).child, 'SIGSTOP'),
      resume: (i) => void signal(slotAt(i).child, 'SIGCONT'),
      async kill(i) {
        const s = slotAt(i);
        s.expectedExit = true;
        signal(s.child, 'SIGCONT');
        signal(s.child, 'SIGKILL');
        await exited(s.child);
      },
      async restart(i) {
        const s = slotAt(i);
        s.restarts += 1;
        s.id = `verify-${i}-${s.restarts}`;
        s.expectedExit = false;
        s.stderrTail = '';
        Object.assign(s, await spawnRunner(i, s.id));
        await whenReady(s.child, s.metricsPort, READY_TIMEOUT_MS);
      },
      stall: (ms) => proxy?.stall(ms),
      unexpectedExits: () => exits,
      async stop(graceMs) {
        for (const s of slots) s.expectedExit = true;
        await Promise.all(slots.map((s) => stopChild(s.child, graceMs)));
        await proxy?.close();
        await front?.close();
      },
    };
  } catch (err) {
    for (const s of slots) await stopChild(s.child, 1000);
    await proxy?.close();
    await front?.close();
    throw err;
  }
}
