import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, lstatSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { CHART_DIR } from '../scripts/dev/chart-readme.js';
import { Agent, request } from 'undici';
import { goal, mb, median, ms, spread, type BenchLine } from './report.js';
import { BARE_SERVER, spawnServer, type ServerProcess } from './processes.js';
import type { BenchTarget } from './target.js';
import { parseRuntimeStage } from '../test/packaging/dockerfile.js';

/**
 * What a user sizes the shim's pods with (docs/performance.md): time from exec
 * to /readyz 200, idle RSS, RSS under a steady poll load, and the production
 * install. Each beside a bare Fastify process (bench/bare-server.ts) measured
 * in the same run. The shim runs as `dfe-keda-shim` does in a pod: its own
 * process, server mode (a real clickhouse-server on loopback).
 */
const SHIM_CLI = new URL('../src/cli/shim.js', import.meta.url).pathname;
const REPEATS = 3;
const IDLE_SETTLE_MS = 3_000;
const POLLS_PER_SECOND = 100;
const SAMPLE_EVERY_MS = 5_000;
const SCRAPE_EVERY_MS = 15_000;
/** The chart's default memory request of the shim (charts/dfe-keda-shim/values.yaml), which these figures must fit. */
const CHART_MEMORY_REQUEST = chartShimMemoryRequest();

/** `kedaShim.resources.requests.memory` of the chart's values.yaml, in bytes (Ki/Mi/Gi or K/M/G). */
export function chartShimMemoryRequest(valuesPath = join(CHART_DIR, 'values.yaml')): number {
  const values = parse(readFileSync(valuesPath, 'utf8')) as { kedaShim?: { resources?: { requests?: { memory?: unknown } } } };
  const quantity = String(values.kedaShim?.resources?.requests?.memory ?? '');
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity);
  if (!match) throw new Error(`${valuesPath}: kedaShim.resources.requests.memory must be a quantity like 160Mi, got ${JSON.stringify(quantity)}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * unit;
}

const OVERRIDE = `queries:
  cached:
    database: default
    sql: "SELECT 42 AS value"
    fresh_for_seconds: 86400
  polled:
    database: default
    sql: "SELECT 42 AS value"
`;

const sleep = (msToWait: number) => new Promise((resolve) => setTimeout(resolve, msToWait));

function shimArgs(clickhouseUrl: string, overridePath: string): string[] {
  return ['--host', '127.0.0.1', '--port', '{port}', '--clickhouse-url', clickhouseUrl, '--override', overridePath];
}

async function withOverride<T>(run: (path: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-bench-pod-'));
  const path = join(dir, 'override.yaml');
  writeFileSync(path, OVERRIDE);
  try {
    return await run(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const serverOnly = (name: string): BenchLine[] => [
  { kind: 'skipped', name, reason: 'needs clickhouse-server (server mode); only the embedded engine is available' },
];

/**
 * The start goal bounds what the shim adds to a bare Fastify process, not a ratio: Node's own
 * start (≈ 130 ms here) dominates the bare figure, so the ratio swings with machine load
 * (1.5× under load 9, 2.4× quiet, with the added time 330–560 ms). A pod's readiness probe
 * looks every 10 s; a second is what an operator would notice.
 */
const START_ADDED_MS = 1_000;

export async function benchStartAndIdle(target: BenchTarget): Promise<BenchLine[]> {
  const name = 'pod sizing, start and idle RSS';
  if (target.kind !== 'server') return serverOnly(name);
  return withOverride(async (overridePath) => {
    const shim: { readyMs: number; rss: number }[] = [];
    const bare: { readyMs: number; rss: number }[] = [];
    const once = async (start: () => Promise<ServerProcess>, into: { readyMs: number; rss: number }[]) => {
      const server = await start();
      try {
        await sleep(IDLE_SETTLE_MS);
        into.push({ readyMs: server.readyMs, rss: server.rssBytes() });
      } finally {
        await server.stop();
      }
    };
    // Interleaved (B A B A B A), so both see the same machine load.
    for (let i = 0; i < REPEATS; i++) {
      await once(() => spawnServer(BARE_SERVER, ['{port}']), bare);
      await once(() => spawnServer(SHIM_CLI, shimArgs(target.url, overridePath)), shim);
    }
    const readyMs = (xs: typeof shim) => median(xs.map((x) => x.readyMs));
    const rss = (xs: typeof shim) => median(xs.map((x) => x.rss));
    return [
      {
        kind: 'figure',
        name: `shim process, exec → /readyz 200 (server mode, median of ${REPEATS} interleaved)`,
        measured:
          `${ms(readyMs(shim))} (${(readyMs(shim) / readyMs(bare)).toFixed(2)}×; runs ${shim.map((x) => ms(x.readyMs)).join(', ')}); ` +
          `+${ms(readyMs(shim) - readyMs(bare))} over bare`,
        baseline: `bare Fastify process: ${ms(readyMs(bare))} (runs ${bare.map((x) => ms(x.readyMs)).join(', ')})`,
        goal: `≤ ${ms(START_ADDED_MS)} over the bare Fastify process (what the shim's own modules and setup add)`,
        outcome: goal(readyMs(shim) - readyMs(bare) <= START_ADDED_MS),
        shortName: 'shim process start (server mode)',
        headline: `exec → /readyz 200 in ${ms(readyMs(shim))}, +${ms(readyMs(shim) - readyMs(bare))} over a bare Fastify process (medians of ${REPEATS})`,
        spreads: [spread(shim.map((x) => x.readyMs), 'shim', 'ms'), spread(bare.map((x) => x.readyMs), 'bare', 'ms')],
      },
      {
        kind: 'figure',
        name: `shim process, idle RSS ${IDLE_SETTLE_MS / 1000} s after ready (server mode, median of ${REPEATS})`,
        measured: `${mb(rss(shim))} (runs ${shim.map((x) => mb(x.rss)).join(', ')}); +${mb(rss(shim) - rss(bare))} over bare`,
        baseline: `bare Fastify process: ${mb(rss(bare))}`,
        goal: `≤ ${mb(CHART_MEMORY_REQUEST)} (the chart’s memory request)`,
        outcome: goal(rss(shim) <= CHART_MEMORY_REQUEST),
        shortName: 'shim process, idle RSS',
        headline: `${mb(rss(shim))} (bare Fastify ${mb(rss(bare))}; medians of ${REPEATS})`,
        spreads: [spread(shim.map((x) => x.rss), 'shim', 'MB'), spread(bare.map((x) => x.rss), 'bare', 'MB')],
      },
    ];
  });
}

/** Least-squares slope of (ms, bytes) samples, in MB per minute. */
export function slopeMbPerMinute(samples: readonly { readonly atMs: number; readonly rss: number }[]): number {
  const n = samples.length;
  if (n < 2) return 0;
  const mx = samples.reduce((a, s) => a + s.atMs, 0) / n;
  const my = samples.reduce((a, s) => a + s.rss, 0) / n;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    num += (s.atMs - mx) * (s.rss - my);
    den += (s.atMs - mx) ** 2;
  }
  return den === 0 ? 0 : ((num / den) * 60_000) / 1024 / 1024;
}

interface Soak {
  readonly samples: { atMs: number; rss: number }[];
  polls: number;
  failed: number;
  /** CPU the process used under the load, millicores. */
  millicores?: number;
}

/** Peaks of the first and second half: RSS is flat when the second half sets no new high. */
function halves(soak: Soak): { firstMax: number; secondMax: number; secondSlope: number } {
  const mid = Math.floor(soak.samples.length / 2);
  const first = soak.samples.slice(0, mid);
  const second = soak.samples.slice(mid);
  return {
    firstMax: Math.max(...first.map((s) => s.rss)),
    secondMax: Math.max(...second.map((s) => s.rss)),
    secondSlope: slopeMbPerMinute(second),
  };
}

function describeSoak(soak: Soak): string {
  const rss = soak.samples.map((s) => s.rss);
  const first = rss[0] ?? 0;
  const last = rss[rss.length - 1] ?? 0;
  const h = halves(soak);
  return (
    `start ${mb(first)}, end ${mb(last)}, max ${mb(Math.max(...rss))} (first half ${mb(h.firstMax)}, second half ${mb(h.secondMax)}), ` +
    `slope ${slopeMbPerMinute(soak.samples).toFixed(2)} MB/min (second half ${h.secondSlope.toFixed(2)})` +
    (soak.millicores === undefined ? '' : `, CPU ${Math.round(soak.millicores)}m`)
  );
}

/**
 * RSS of the shim and of a bare Fastify process while each gets
 * `POLLS_PER_SECOND` requests a second for `seconds` (default 300; `--soak-seconds`
 * for quick runs). The shim's polls alternate a cached query and one that asks
 * ClickHouse every time; /metrics is scraped every 15 s as Prometheus would.
 */
export async function benchSoak(target: BenchTarget, seconds: number): Promise<BenchLine[]> {
  const name = 'pod sizing, RSS under load';
  if (target.kind !== 'server') return serverOnly(name);
  return withOverride(async (overridePath) => {
    const shim = await spawnServer(SHIM_CLI, shimArgs(target.url, overridePath));
    const bare = await spawnServer(BARE_SERVER, ['{port}']);
    const agent = new Agent({ connections: 8 });
    const shimSoak: Soak = { samples: [], polls: 0, failed: 0 };
    const bareSoak: Soak = { samples: [], polls: 0, failed: 0 };
    const poll = async (url: string, soak: Soak) => {
      soak.polls += 1;
      try {
        const res = await request(url, { dispatcher: agent });
        await res.body.dump();
        if (res.statusCode !== 200) soak.failed += 1;
      } catch {
        soak.failed += 1;
      }
    };
    const pending = new Set<Promise<void>>();
    const track = (p: Promise<void>) => {
      pending.add(p);
      void p.finally(() => pending.delete(p));
    };
    const cpuAtStart = { shim: shim.cpuMs(), bare: bare.cpuMs() };
    try {
      const started = performance.now();
      const endAt = started + seconds * 1000;
      let sent = 0;
      let nextSample = started + SAMPLE_EVERY_MS;
      let nextScrape = started;
      for (let now = started; now < endAt; now = performance.now()) {
        // Catch up to the rate, whatever the timer's jitter.
        const owed = Math.floor(((now - started) / 1000) * POLLS_PER_SECOND) - sent;
        for (let i = 0; i < owed; i++) {
          track(poll(`${shim.url}/q/${sent % 2 === 0 ? 'cached' : 'polled'}`, shimSoak));
          track(poll(`${bare.url}/q/cached`, bareSoak));
          sent += 1;
        }
        if (now >= nextScrape) {
          track(poll(`${shim.url}/metrics`, { samples: [], polls: 0, failed: 0 }));
          nextScrape += SCRAPE_EVERY_MS;
        }
        if (now >= nextSample) {
          shimSoak.samples.push({ atMs: now - started, rss: shim.rssBytes() });
          bareSoak.samples.push({ atMs: now - started, rss: bare.rssBytes() });
          nextSample += SAMPLE_EVERY_MS;
        }
        await sleep(5);
      }
      await Promise.all(pending);
      const wallMs = performance.now() - started;
      shimSoak.millicores = ((shim.cpuMs() - cpuAtStart.shim) / wallMs) * 1000;
      bareSoak.millicores = ((bare.cpuMs() - cpuAtStart.bare) / wallMs) * 1000;
    } finally {
      await agent.close();
      await shim.stop();
      await bare.stop();
    }
    const peak = Math.max(...shimSoak.samples.map((s) => s.rss));
    const { firstMax, secondMax } = halves(shimSoak);
    return [
      {
        kind: 'figure',
        name: `shim process, RSS under ${POLLS_PER_SECOND} polls/s for ${seconds} s (server mode; half cached, half asking ClickHouse; sampled every ${SAMPLE_EVERY_MS / 1000} s)`,
        measured: `${describeSoak(shimSoak)}; ${shimSoak.polls} polls, ${shimSoak.failed} failed`,
        baseline: `bare Fastify process, same rate: ${describeSoak(bareSoak)}`,
        goal: `flat (second half's max ≤ first half's + 5 MB), max ≤ ${mb(CHART_MEMORY_REQUEST)} (the chart's memory request), all 200`,
        outcome: goal(
          secondMax <= firstMax + 5 * 1024 * 1024 && peak <= CHART_MEMORY_REQUEST && shimSoak.failed === 0 && shimSoak.polls > 0,
        ),
        shortName: `shim process, RSS under ${POLLS_PER_SECOND} polls/s for ${seconds} s`,
        headline:
          `${mb(shimSoak.samples[0]?.rss ?? 0)} → ${mb(shimSoak.samples.at(-1)?.rss ?? 0)}, peak ${mb(peak)} (first half ${mb(firstMax)}, ` +
          `second ${mb(secondMax)}); CPU ${Math.round(shimSoak.millicores ?? 0)}m; bare Fastify peak ${mb(Math.max(...bareSoak.samples.map((s) => s.rss)))}`,
      },
    ];
  });
}

function treeBytes(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const entry of readdirSync(path)) total += treeBytes(join(path, entry));
  return total;
}

/** Disk usage as `du -sk` counts it (whole blocks: many small files weigh more than their bytes). */
function diskBytes(path: string): number {
  return Number(execFileSync('du', ['-sk', path], { encoding: 'utf8' }).split('\t')[0]) * 1024;
}

/**
 * The image's prune of files Node never loads (the Dockerfile's `RUN find node_modules …`),
 * replayed as written, so the figure is the image's node_modules and cannot drift from it.
 */
function pruneAsTheImage(dir: string): void {
  const prune = parseRuntimeStage(join(process.cwd(), 'Dockerfile')).steps.filter((s) => s.kind === 'run' && s.command.startsWith('find node_modules '));
  if (prune.length !== 1) throw new Error(`Dockerfile: expected one "RUN find node_modules …" prune step in the runtime stage, found ${prune.length}`);
  for (const step of prune) if (step.kind === 'run') execFileSync('sh', ['-c', step.command], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
}

function npmInstallOmitDev(dir: string): void {
  // As the Dockerfile's runtime stage does.
  execFileSync('npm', ['install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'pipe'],
    timeout: 300_000,
  });
}

/**
 * The production install: package.json and package-lock.json in a temp dir,
 * `npm install --omit=dev`, plus the package's own files (dist/src, queries,
 * examples). Baseline: a bare Fastify install at the locked version.
 */
export async function benchInstallSize(): Promise<BenchLine[]> {
  const root = process.cwd();
  const shimDir = mkdtempSync(join(tmpdir(), 'dfe-bench-install-'));
  const bareDir = mkdtempSync(join(tmpdir(), 'dfe-bench-install-bare-'));
  try {
    copyFileSync(join(root, 'package.json'), join(shimDir, 'package.json'));
    copyFileSync(join(root, 'package-lock.json'), join(shimDir, 'package-lock.json'));
    npmInstallOmitDev(shimDir);
    const unpruned = treeBytes(join(shimDir, 'node_modules'));
    pruneAsTheImage(shimDir);
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
    const fastifyVersion = lock.packages['node_modules/fastify']?.version ?? 'latest';
    writeFileSync(join(bareDir, 'package.json'), JSON.stringify({ name: 'bare', private: true, dependencies: { fastify: fastifyVersion } }));
    npmInstallOmitDev(bareDir);
    const ownPaths = ['dist/src', 'queries', 'examples'].map((p) => join(root, p));
    const deps = treeBytes(join(shimDir, 'node_modules'));
    const own = ownPaths.reduce((n, p) => n + treeBytes(p), 0);
    const bare = treeBytes(join(bareDir, 'node_modules'));
    const total = deps + own;
    const onDisk = diskBytes(join(shimDir, 'node_modules')) + ownPaths.reduce((n, p) => n + diskBytes(p), 0);
    return [
      {
        kind: 'figure',
        name: "production install (as the image: npm install --omit=dev, then the Dockerfile's prune of files Node never loads)",
        measured:
          `${mb(total)} of files (node_modules ${mb(deps)} + package ${mb(own)}); ${mb(onDisk)} on disk (du); ` +
          `before the prune (maps, type declarations, TypeScript sources, markdown): node_modules ${mb(unpruned)}`,
        baseline: `bare Fastify ${fastifyVersion} install: ${mb(bare)} of files, ${mb(diskBytes(join(bareDir, 'node_modules')))} on disk`,
        goal: '≤ 50 MB',
        outcome: goal(total <= 50 * 1024 * 1024),
        shortName: 'production install',
        headline: `${mb(total)} of files, ${mb(onDisk)} on disk (bare Fastify: ${mb(bare)} of files)`,
      },
    ];
  } finally {
    rmSync(shimDir, { recursive: true, force: true });
    rmSync(bareDir, { recursive: true, force: true });
  }
}
