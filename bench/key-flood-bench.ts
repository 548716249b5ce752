import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { parse } from 'yaml';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { startEngineFront } from '../src/clickhouse/http-front.js';
import { spawnServer } from './processes.js';
import { goal, int, type BenchLine } from './report.js';

/**
 * issue #18: a server-mode shim process flooded with 200 000 distinct keys, 500
 * at once. Its peak RSS as a share of the chart's memory limit, goal ≤ 60 %;
 * the Node heap sized as the image sizes it from that limit (scripts/image/node-heap),
 * beside Node's default heap. The first 12 000 keys go 24 at once (all fresh:
 * the cache full at its bound), the rest 500 at once. The shim queries a real HTTP listener that
 * runs each query on the embedded engine (src/clickhouse/http-front.ts) in this process,
 * so the shim's RSS is its own.
 */
const KEYS = Number(process.env.DFE_BENCH_FLOOD_KEYS ?? 200_000);
const CONCURRENCY = 500;
/** First the cache is filled past its 10 000-key bound at a pace the in-flight caps admit, so the flood meets a full cache. */
const FILL_KEYS = 12_000;
const FILL_CONCURRENCY = 24;
/** Bound on one run; a run that hits it says how many keys it sent. */
const MAX_SECONDS = 420;
const SHIM_CLI = new URL('../src/cli/shim.js', import.meta.url).pathname;
const CHART_VALUES = new URL('../../charts/dfe-keda-shim/values.yaml', import.meta.url).pathname;
const NODE_HEAP = new URL('../../scripts/image/node-heap', import.meta.url).pathname;

/** The heap flags the image's launcher would pass under this memory limit (scripts/image/node-heap, fed a cgroup file). */
function imageHeapFlags(limitBytes: number, dir: string): string {
  writeFileSync(join(dir, 'memory.max'), `${limitBytes}\n`);
  const run = spawnSync('sh', [NODE_HEAP], { env: { PATH: process.env.PATH ?? '', DFE_CGROUP_ROOT: dir }, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`node-heap failed: ${run.stderr}`);
  return run.stdout.trim();
}

/** `kedaShim.resources.limits.memory` of the chart, in bytes (Mi/Gi/M/G or plain). */
export function chartMemoryLimitBytes(): number {
  const values = parse(readFileSync(CHART_VALUES, 'utf8')) as { kedaShim: { resources: { limits: { memory: string } } } };
  const text = String(values.kedaShim.resources.limits.memory);
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(text);
  if (!match) throw new Error(`chart memory limit ${text} not understood`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, K: 1e3, M: 1e6, G: 1e9 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * unit;
}

interface FloodRun {
  readonly sent: number;
  readonly seconds: number;
  readonly peakRss: number;
  /** RSS after 10 %, 50 % and all of the keys. */
  readonly marks: readonly number[];
  readonly non200: number;
  readonly fresh: number;
  readonly heapUsed: number;
  readonly cacheEntries: number;
  /** Cache entries after the fill phase. */
  readonly filled: number;
}

async function scrape(url: string, name: string): Promise<number> {
  const res = await request(`${url}/metrics`);
  const text = await res.body.text();
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return Number(match?.[1] ?? NaN);
}

async function flood(frontUrl: string, overridePath: string, nodeFlags: string): Promise<FloodRun> {
  const env: Record<string, string> = nodeFlags === '' ? {} : { NODE_OPTIONS: nodeFlags };
  const shim = await spawnServer(SHIM_CLI, ['--host', '127.0.0.1', '--port', '{port}', '--clickhouse-url', frontUrl, '--override', overridePath], {
    ...env,
    LOG_LEVEL: 'warn',
  });
  const agent = new Agent({ connections: CONCURRENCY, pipelining: 1 });
  let peakRss = shim.rssBytes();
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, shim.rssBytes())), 200);
  const marks: number[] = [];
  const markAt = [Math.round(KEYS / 10), Math.round(KEYS / 2), KEYS];
  let sent = 0;
  let done = 0;
  let non200 = 0;
  let fresh = 0;
  const startedMs = Date.now();
  const loop = (upTo: number) => async () => {
    while (sent < upTo && Date.now() - startedMs < MAX_SECONDS * 1000) {
      const i = sent++;
      const res = await request(`${shim.url}/q/flood?service=svc-${i}`, { dispatcher: agent });
      const body = (await res.body.json()) as { source?: string };
      if (res.statusCode !== 200) non200 += 1;
      else if (body.source === 'fresh') fresh += 1;
      done += 1;
      if (done === markAt[marks.length]) marks.push(shim.rssBytes());
    }
  };
  try {
    await Promise.all(Array.from({ length: FILL_CONCURRENCY }, loop(Math.min(FILL_KEYS, KEYS))));
    const filled = await scrape(shim.url, 'dfe_keda_shim_cache_entries');
    await Promise.all(Array.from({ length: CONCURRENCY }, loop(KEYS)));
    const seconds = (Date.now() - startedMs) / 1000;
    peakRss = Math.max(peakRss, shim.rssBytes());
    const heapUsed = await scrape(shim.url, 'nodejs_heap_size_used_bytes');
    const cacheEntries = await scrape(shim.url, 'dfe_keda_shim_cache_entries');
    return { sent: done, seconds, peakRss, marks, non200, fresh, heapUsed, cacheEntries, filled };
  } finally {
    clearInterval(sampler);
    await agent.close();
    await shim.stop();
  }
}

export async function benchKeyFlood(embedded: ClickHouseHandle, database: string): Promise<BenchLine[]> {
  const limit = chartMemoryLimitBytes();
  const dir = mkdtempSync(join(tmpdir(), 'dfe-bench-flood-'));
  const flags = imageHeapFlags(limit, dir);
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, `queries:\n  flood:\n    database: ${database}\n    params: [service]\n    sql: "SELECT length({service:String}) AS value"\n`);
  const front = await startEngineFront(embedded);
  const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
  const share = (b: number) => `${((100 * b) / limit).toFixed(0)} %`;
  const describe = (r: FloodRun) =>
    `peak RSS ${mib(r.peakRss)} = ${share(r.peakRss)} of the chart's ${mib(limit)} limit (at ${markAtText(r)}: ${r.marks.map(mib).join(' → ')}); ` +
    `heap used at end ${mib(r.heapUsed)}, cache ${int(r.filled)} entries after the fill, ${int(r.cacheEntries)} at end; ${int(r.fresh)} fresh, ${r.non200} non-200; ${int(r.sent)} keys in ${Math.round(r.seconds)} s`;
  const markAtText = (r: FloodRun) => [KEYS / 10, KEYS / 2, KEYS].slice(0, r.marks.length).map((n) => `${int(n / 1000)} k`).join('/');
  try {
    const sized = await flood(front.url, overridePath, flags);
    const unsized = await flood(front.url, overridePath, '');
    const complete = sized.sent === KEYS;
    return [
      {
        kind: 'figure',
        name: `shim process, ${int(KEYS)} distinct keys ${CONCURRENCY} at once (server mode over an HTTP front to the embedded engine; \`${flags}\` as the image derives them from the limit)`,
        measured: describe(sized),
        baseline: `Node's default heap: ${describe(unsized)}`,
        goal: `peak RSS ≤ 60 % of the chart's memory limit (${mib(limit * 0.6)}), all ${int(KEYS)} keys answered 200`,
        outcome: goal(complete && sized.non200 === 0 && sized.peakRss <= limit * 0.6),
      },
    ];
  } finally {
    await front.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
