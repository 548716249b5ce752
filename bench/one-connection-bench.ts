import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent as HttpAgent, get } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import type { CompiledQuery } from '../src/catalogue/types.js';
import { openClickHouse, type ClickHouseHandle } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { runCompact } from '../src/shim/clickhouse-query.js';
import { spawnServer, type ServerProcess } from './processes.js';
import { goal, int, ms, percentile, type BenchLine } from './report.js';
import { shimCatalogue } from './shim-catalogue.js';

/**
 * KEDA's everyday traffic (issue 29): one poll at a time on one connection, every answer
 * fresh. The shim in server mode, in its own process as in a pod (the CLI, `dfe-keda-shim`),
 * against a steady "server" — the embedded engine behind its HTTP front in a third process
 * (front-process.ts) — and, as the same-run baseline, the same SQL sent straight to that front
 * with the shim's own client settings, interleaved. This process is only the client of both.
 */
const DATABASE = 'bench_one';
const HUNTS = 40;
const SERVICES = 5_000;
const ROUNDS = 1_000;
/** Polls of the shim and of the proxy before the rounds, per route. */
const WARM_UP = 3_000;
/** Distinct keys one at a time: interleaved in chunks, so load moves both sides alike. */
const CHUNK = 500;

interface Front {
  readonly url: string;
  /** Where it runs (frontPlacement), for the lines. */
  readonly placement: string;
  /** The engine time (ms) of each query the front ran since the last call, in order (front-process.ts). */
  engineTimes(): Promise<number[]>;
  stop(): Promise<void>;
}

/** How the front is run: the command in front of node, the engine's threads, and the words the lines carry. */
interface Placement {
  readonly command: readonly string[];
  readonly maxThreads?: number;
  readonly said: string;
}

/** The CPUs this process may run on (Linux: /proc/self/status), or undefined when unknown. */
function allowedCpus(): number[] | undefined {
  try {
    const line = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    if (line === undefined) return undefined;
    return line.split(',').flatMap((range) => {
      const [from = Number.NaN, to = from] = range.split('-').map(Number);
      return Array.from({ length: to - from + 1 }, (_, i) => from + i);
    });
  } catch {
    return undefined;
  }
}

/**
 * The front on a core of its own, running each query on one thread, as a ClickHouse server on a
 * machine of its own runs (a server sizes `max_threads` by the cores it sees; the embedded
 * engine counts the machine's, not the ones it is pinned to). Beside it, on the machine's two
 * cores, its engine's time had a p99 1.3–1.5 × its p50 on every side alike, the client and the
 * service in the middle taking the core a query needed (docs/performance.md#one-connection-where-the-tail-went);
 * the goal asks for a steady server. The client and the services run anywhere. Without a
 * second CPU or `taskset` the front runs beside them, and the lines say so.
 */
function frontPlacement(): Placement {
  const cpus = allowedCpus();
  const last = cpus?.at(-1);
  if (cpus === undefined || cpus.length < 2 || last === undefined) return { command: [], said: 'the front unpinned (fewer than 2 CPUs known)' };
  if (spawnSync('taskset', ['--version']).status !== 0) return { command: [], said: 'the front unpinned (no taskset)' };
  return { command: ['taskset', '-c', String(last)], maxThreads: 1, said: `the front pinned to CPU ${last} of ${cpus.length}, max_threads 1` };
}

async function startFront(): Promise<Front> {
  const script = new URL('./front-process.js', import.meta.url).pathname;
  const placement = frontPlacement();
  const argv = [process.execPath, script, DATABASE, String(HUNTS), String(SERVICES), ...(placement.maxThreads === undefined ? [] : [String(placement.maxThreads)])];
  const [command = process.execPath, ...args] = [...placement.command, ...argv];
  const child: ChildProcess = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const nextLine = () =>
    new Promise<string>((resolve, reject) => {
      lines.once('line', (line) => resolve(line.trim()));
      void exited.then(() => reject(new Error('the front process exited')));
    });
  const url = await nextLine();
  return {
    url,
    placement: placement.said,
    async engineTimes() {
      const answer = nextLine();
      child.stdin?.write('engine-times\n');
      return JSON.parse(await answer) as number[];
    },
    async stop() {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** What the event loop and the GC of this process (the client of both sides) did while a side ran. */
interface LoopWatch {
  stop(): { readonly delayP99Ms: number; readonly delayMaxMs: number; readonly gcs: number; readonly gcMaxMs: number };
}

function watchLoop(): LoopWatch {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  let gcs = 0;
  let gcMaxMs = 0;
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcs += 1;
      gcMaxMs = Math.max(gcMaxMs, entry.duration);
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  return {
    stop() {
      delay.disable();
      gc.disconnect();
      return { delayP99Ms: delay.percentile(99) / 1e6, delayMaxMs: delay.max / 1e6, gcs, gcMaxMs };
    },
  };
}

async function timeGet(agent: Agent, url: string): Promise<{ ms: number; source: string }> {
  const started = performance.now();
  const res = await request(url, { dispatcher: agent });
  const body = (await res.body.json()) as { source?: string };
  return { ms: performance.now() - started, source: res.statusCode === 200 ? (body.source ?? '') : `http ${res.statusCode}` };
}

/**
 * One poll on one kept-alive socket through Node's own HTTP client: the stack the direct side
 * goes through (@clickhouse/client is Node's `http` too), so both sides of a pair pay the same
 * client (docs/performance.md#one-connection-where-the-tail-went).
 */
function timeSequentialGet(agent: HttpAgent, url: string): Promise<{ ms: number; source: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const body = status === 200 ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { source?: string }) : {};
        resolve({ ms: performance.now() - started, source: status === 200 ? (body.source ?? '') : `http ${status}` });
      });
    }).on('error', reject);
  });
}

/** A client of one kept-alive socket, as KEDA's poll of one ScaledObject. */
const oneSocket = (): HttpAgent => new HttpAgent({ keepAlive: true, maxSockets: 1 });

async function timeDirect(client: ClickHouseHandle, query: CompiledQuery, params: Record<string, string>): Promise<number> {
  const started = performance.now();
  await runCompact(client.client, query, params, new AbortController().signal);
  return performance.now() - started;
}

const load = (): string => `load ${(loadavg()[0] ?? 0).toFixed(1)}`;

/**
 * The order of the sides in round (or chunk) `i`: each side takes each place in turn, so none
 * always goes first or last (what the previous side left in the front's engine, its caches
 * or the machine's scheduler, falls on every side alike).
 */
function sideOrder(i: number, sides: number): number[] {
  return Array.from({ length: sides }, (_, place) => (place + i) % sides);
}

/**
 * Where the tail was: each answer split into the front's engine time for its query (the
 * front runs them one at a time, in the order sent, so the i-th round's queries are the
 * engine times k·i … k·i + k − 1 for k sides, in that round's sideOrder) and the rest (the
 * client, HTTP, the front's JS; for the shim and the proxy also their own process). Undefined
 * when the front did not run exactly one query per answer.
 */
function engineSplit(engine: readonly number[], sides: readonly { label: string; times: readonly number[] }[]): string | undefined {
  const rounds = sides[0]?.times.length ?? 0;
  if (engine.length !== sides.length * rounds || sides.some((s) => s.times.length !== rounds)) return undefined;
  const engineOf = (k: number, i: number) => engine[sides.length * i + sideOrder(i, sides.length).indexOf(k)] ?? 0;
  const side = (label: string, total: readonly number[], eng: readonly number[]) => {
    const rest = total.map((t, i) => t - (eng[i] ?? 0));
    const p50 = percentile(total, 50);
    const p99 = percentile(total, 99);
    const engineP50 = percentile(eng, 50);
    // The slowest 1 %: how much of their excess over p50 was the engine's own excess over its p50.
    let excess = 0;
    let engineExcess = 0;
    total.forEach((t, i) => {
      if (t < p99) return;
      excess += t - p50;
      engineExcess += (eng[i] ?? 0) - engineP50;
    });
    const share = excess > 0 ? `${Math.round((100 * engineExcess) / excess)}%` : 'n/a';
    const [e50, e99, r50, r99] = [engineP50, percentile(eng, 99), percentile(rest, 50), percentile(rest, 99)];
    return `${label}: engine p50 ${ms(e50)}, p99 ${ms(e99)} (${(e99 / e50).toFixed(2)}×), the rest p50 ${ms(r50)}, p99 ${ms(r99)}; engine ${share} of the slowest 1%'s excess`;
  };
  return sides.map((s, k) => side(s.label, s.times, s.times.map((_, i) => engineOf(k, i)))).join('; ');
}

/**
 * One route at one connection: ROUNDS interleaved rounds (direct, bare proxy, shim, in
 * sideOrder) after a warm-up. The judged figure is the shim against direct; the bare proxy
 * (bare-proxy.ts, its own process) shows what any Node HTTP service in the middle costs on
 * this machine.
 */
async function oneRoute(front: Front, shim: ShimProcess, direct: ClickHouseHandle, name: 'backlog' | 'pressure'): Promise<BenchLine> {
  const query = shim.query(name);
  const agent = oneSocket();
  const proxyAgent = oneSocket();
  const service = (i: number) => `svc-${i % SERVICES}`;
  const route = (i: number) => (name === 'backlog' ? `${shim.url}/keda/hunt-backlog` : `${shim.url}/keda/pressure?service=${service(i)}&hold=50`);
  const proxied = (i: number) => `${shim.proxyUrl}/q/${name}${name === 'backlog' ? '' : `?service=${service(i)}`}`;
  const params = (i: number): Record<string, string> => (name === 'backlog' ? {} : { service: service(i) });
  try {
    // A pod has answered for hours: the shim's and the proxy's processes (started for this
    // bench) first run their code hot, as the client process's already is (the shim's
    // answers fell from 1.9 to 1.1 ms of CPU each over its first 4,000). Keys the measured
    // rounds never ask.
    for (let i = 0; i < WARM_UP; i++) {
      await timeSequentialGet(agent, route(SERVICES - 1 - (i % 1_000)));
      await timeSequentialGet(proxyAgent, proxied(SERVICES - 1 - (i % 1_000)));
    }
    for (let i = 0; i < 100; i++) {
      await timeDirect(direct, query, params(i));
      await timeSequentialGet(proxyAgent, proxied(i));
      await timeSequentialGet(agent, route(i));
    }
    const viaShim: number[] = [];
    const viaProxy: number[] = [];
    const straight: number[] = [];
    let notFresh = 0;
    await front.engineTimes(); // the warm-up's
    const shimCpuBefore = shim.process.cpuMs();
    const watch = watchLoop();
    // The sides in the order engineSplit pairs with the front's engine times: 0 direct, 1 proxy, 2 shim.
    const ask = [
      async (i: number) => void straight.push(await timeDirect(direct, query, params(i))),
      async (i: number) => void viaProxy.push((await timeSequentialGet(proxyAgent, proxied(i))).ms),
      async (i: number) => {
        const got = await timeSequentialGet(agent, route(i));
        viaShim.push(got.ms);
        if (got.source !== 'fresh') notFresh += 1;
      },
    ];
    for (let i = 0; i < ROUNDS; i++) for (const k of sideOrder(i, ask.length)) await ask[k]?.(i);
    const loop = watch.stop();
    const shimCpuPerAnswer = (shim.process.cpuMs() - shimCpuBefore) / ROUNDS;
    const engine = await front.engineTimes();
    const split =
      engineSplit(engine, [
        { label: 'direct', times: straight },
        { label: 'proxy', times: viaProxy },
        { label: 'shim', times: viaShim },
      ]) ?? `engine times not paired (${engine.length} queries for ${ROUNDS} rounds of 3)`;
    const p50 = percentile(viaShim, 50);
    const p99 = percentile(viaShim, 99);
    const d50 = percentile(straight, 50);
    const d99 = percentile(straight, 99);
    const b50 = percentile(viaProxy, 50);
    const b99 = percentile(viaProxy, 99);
    const added = p50 - d50;
    const tail = p99 / p50;
    // Rounds where one side took 20 ms more than the other: a cause of the shim's own shows as
    // an excess on its side; load on the machine hits both sides alike.
    const slowerBy = (a: number[], b: number[]) => a.filter((x, i) => x - (b[i] ?? x) > 20).length;
    return {
      kind: 'figure',
      name: `shim, one connection, fresh ${name} (${int(ROUNDS)} interleaved rounds, server mode; shim, front and client each in its own process)`,
      shortName: `shim, one connection, fresh ${name}`,
      headline: `p50 ${ms(p50)} (+${ms(added)} over direct; a bare proxy +${ms(b50 - d50)}), p99 ${ms(p99)} (${tail.toFixed(2)}× p50)`,
      measured:
        `p50 ${ms(p50)}, p99 ${ms(p99)} (${tail.toFixed(2)}× p50); added p50 ${ms(added)}${notFresh ? `; ${notFresh} not fresh` : ''}; ` +
        `a bare Fastify proxy in its own process (the same runCompact call): p50 ${ms(b50)} (+${ms(b50 - d50)}), p99 ${ms(b99)} (${(b99 / b50).toFixed(2)}×); ` +
        `${slowerBy(viaShim, straight)} rounds shim ≥ 20 ms slower than direct, ${slowerBy(straight, viaShim)} direct ≥ 20 ms slower; ` +
        `shim process CPU ${ms(shimCpuPerAnswer)} per answer (idle work included); ` +
        `the client's event loop delay p99 ${ms(loop.delayP99Ms)}, max ${ms(loop.delayMaxMs)}, ${loop.gcs} GCs (longest ${ms(loop.gcMaxMs)}); ` +
        `${front.placement}; at the front, ${split}; ${load()}`,
      baseline: `the same SQL straight to the front (the shim's client settings): p50 ${ms(d50)}, p99 ${ms(d99)} (${(d99 / d50).toFixed(2)}× p50)`,
      goal: 'added p50 ≤ 1 ms, p99 ≤ 1.3× p50, every answer fresh',
      outcome: goal(added <= 1 && tail <= 1.3 && notFresh === 0),
    };
  } finally {
    agent.destroy();
    proxyAgent.destroy();
  }
}

/**
 * SERVICES distinct pressure keys one at a time, against as many one-by-one queries sent
 * directly; the bare proxy's total beside them (not judged).
 */
async function distinctKeys(shim: ShimProcess, direct: ClickHouseHandle, front: Front): Promise<BenchLine[]> {
  const query = shim.query('pressure');
  const agent = oneSocket();
  const proxyAgent = oneSocket();
  let shimMs = 0;
  let directMs = 0;
  let proxyMs = 0;
  let notFresh = 0;
  // The shim's queries are counted at the front: its engine times while only the shim asked.
  let started = 0;
  const timed = async (from: number, ask: (i: number) => Promise<unknown>): Promise<number> => {
    const t0 = performance.now();
    for (let i = from; i < from + CHUNK; i++) await ask(i);
    return performance.now() - t0;
  };
  try {
    // Warm, as in oneRoute, on services the figure never asks.
    for (let i = 0; i < WARM_UP; i++) {
      await timeSequentialGet(agent, `${shim.url}/keda/pressure?service=warm-${i}&hold=50`);
      await timeSequentialGet(proxyAgent, `${shim.proxyUrl}/q/pressure?service=warm-${i}`);
    }
    // Each side's chunk adds its time once the chunk is over (never `x += await …`, which reads x before the wait).
    const chunk = [
      async (from: number) => {
        const took = await timed(from, (i) => timeDirect(direct, query, { service: `svc-${i}` }));
        directMs += took;
      },
      async (from: number) => {
        const took = await timed(from, (i) => timeSequentialGet(proxyAgent, `${shim.proxyUrl}/q/pressure?service=svc-${i}`));
        proxyMs += took;
      },
      async (from: number) => {
        await front.engineTimes();
        const took = await timed(from, async (i) => {
          if ((await timeSequentialGet(agent, `${shim.url}/keda/pressure?service=svc-${i}&hold=50`)).source !== 'fresh') notFresh += 1;
        });
        shimMs += took;
        const queries = await front.engineTimes();
        started += queries.length;
      },
    ];
    for (let from = 0; from < SERVICES; from += CHUNK) for (const k of sideOrder(from / CHUNK, chunk.length)) await chunk[k]?.(from);
  } finally {
    agent.destroy();
    proxyAgent.destroy();
  }
  const ratio = shimMs / directMs;
  const lines: BenchLine[] = [
    {
      kind: 'figure',
      name: `shim, ${int(SERVICES)} distinct pressure keys one at a time (one connection, server mode, shim in its own process)`,
      shortName: `shim, ${int(SERVICES)} distinct pressure keys one at a time`,
      headline: `${(shimMs / 1000).toFixed(1)} s, ${ratio.toFixed(2)}× as many one-by-one queries sent directly`,
      measured:
        `${(shimMs / 1000).toFixed(2)} s (${ratio.toFixed(2)}×), ${int(started)} ClickHouse queries${notFresh ? `, ${notFresh} not fresh` : ''}; ` +
        `a bare Fastify proxy in its own process: ${(proxyMs / 1000).toFixed(2)} s (${(proxyMs / directMs).toFixed(2)}×); ${front.placement}; ${load()}`,
      baseline: `${int(SERVICES)} one-by-one queries straight to the front: ${(directMs / 1000).toFixed(2)} s`,
      goal: '≤ 1.05×, every answer fresh',
      outcome: goal(ratio <= 1.05 && notFresh === 0),
    },
  ];
  // Then all at once, each on its own connection: the batches still hold. KEDA's poll loops
  // keep their connections open, so they are opened first (a burst of /readyz).
  const burstAgent = new Agent({ connections: 1_010, keepAliveTimeout: 30_000 });
  try {
    await Promise.all(Array.from({ length: 1_000 }, () => request(`${shim.url}/readyz`, { dispatcher: burstAgent }).then((r) => r.body.dump())));
    await front.engineTimes();
    const answers = await Promise.all(Array.from({ length: 1_000 }, (_, i) => timeGet(burstAgent, `${shim.url}/keda/pressure?service=svc-${i}&hold=50`)));
    const queries = (await front.engineTimes()).length;
    const fresh = answers.filter((a) => a.source === 'fresh').length;
    lines.push({
      kind: 'figure',
      name: 'shim, 1 000 distinct pressure keys at once (same shim process, server mode)',
      measured: `${int(queries)} ClickHouse queries, ${int(fresh)}/1 000 fresh, p100 ${ms(percentile(answers.map((a) => a.ms), 100))}; ${load()}`,
      baseline: '1 000 keys',
      goal: '≤ 4 ClickHouse queries, all fresh',
      outcome: goal(queries <= 4 && fresh === 1_000),
    });
  } finally {
    await burstAgent.close();
  }
  return lines;
}

/** The shim as a pod runs it: the CLI in its own process, server mode against the front. */
interface ShimProcess {
  readonly url: string;
  readonly process: ServerProcess;
  /** The bare proxy (bare-proxy.ts) beside it, against the same front. */
  readonly proxyUrl: string;
  /** The catalogue's compiled query, as the shim compiles it (the direct side sends its SQL). */
  query(name: string): CompiledQuery;
}

const SHIM_CLI = new URL('../src/cli/shim.js', import.meta.url).pathname;
const BARE_PROXY = new URL('./bare-proxy.js', import.meta.url).pathname;
const OVERRIDE = `queries:\n  pressure:\n    database: ${DATABASE}\n`;

async function withShim<T>(run: (shim: ShimProcess, direct: ClickHouseHandle, front: Front) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-bench-one-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, OVERRIDE);
  const env = { DFE_CLICKHOUSE_DATA_DATABASE: DATABASE, LOG_LEVEL: 'warn' };
  const config = loadConfig({ DFE_CLICKHOUSE_URL: 'http://127.0.0.1:1', DFE_KEDA_SHIM_QUERY_CONFIG: overridePath, ...env });
  const catalogue = await shimCatalogue(overridePath, config.clickhouse);
  const front = await startFront();
  let direct: ClickHouseHandle | undefined;
  let shim: ServerProcess | undefined;
  let proxy: ServerProcess | undefined;
  try {
    direct = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: front.url }).clickhouse);
    shim = await spawnServer(SHIM_CLI, ['--host', '127.0.0.1', '--port', '{port}', '--clickhouse-url', front.url, '--override', overridePath], env);
    proxy = await spawnServer(BARE_PROXY, ['{port}', front.url, overridePath, DATABASE]);
    const query = (name: string): CompiledQuery => {
      const found = catalogue.queries.get(name);
      if (found === undefined) throw new Error(`no ${name} query in the catalogue`);
      return found;
    };
    return await run({ url: shim.url, process: shim, proxyUrl: proxy.url, query }, direct, front);
  } finally {
    await proxy?.stop();
    await shim?.stop();
    await direct?.close();
    await front.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function benchOneConnection(): Promise<BenchLine[]> {
  return withShim(async (shim, direct, front) => [await oneRoute(front, shim, direct, 'backlog'), await oneRoute(front, shim, direct, 'pressure')]);
}

export function benchDistinctKeys(): Promise<BenchLine[]> {
  return withShim(distinctKeys);
}
