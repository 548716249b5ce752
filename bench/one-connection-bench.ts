import { spawn, type ChildProcess } from 'node:child_process';
import { Agent as HttpAgent, get } from 'node:http';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import type { CompiledQuery } from '../src/catalogue/types.js';
import { openClickHouse, type ClickHouseHandle } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { runCompact } from '../src/shim/clickhouse-query.js';
import { goal, int, ms, percentile, type BenchLine } from './report.js';
import { startBenchShim, type BenchShim } from './servers.js';

/**
 * KEDA's everyday traffic (issue 29): one poll at a time on one connection, every answer
 * fresh. The shim in server mode against a steady "server" — the embedded engine behind its
 * HTTP front in its own process (front-process.ts) — and, as the same-run baseline, the same
 * SQL sent straight to that front with the shim's own client settings, interleaved.
 */
const DATABASE = 'bench_one';
const HUNTS = 40;
const SERVICES = 5_000;
const PAIRS = 1_000;
/** Distinct keys one at a time: interleaved in chunks, so load moves both sides alike. */
const CHUNK = 500;

interface Front {
  readonly url: string;
  /** The engine time (ms) of each query the front ran since the last call, in order (front-process.ts). */
  engineTimes(): Promise<number[]>;
  stop(): Promise<void>;
}

async function startFront(): Promise<Front> {
  const script = new URL('./front-process.js', import.meta.url).pathname;
  const child: ChildProcess = spawn(process.execPath, [script, DATABASE, String(HUNTS), String(SERVICES)], { stdio: ['pipe', 'pipe', 'inherit'] });
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

/** What the event loop and the GC of this process (the shim's) did while a side ran. */
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
 * client. The client runs in the process that also runs the shim; undici's `request` +
 * `body.json()` cost about 0.2 ms more CPU per answer there than `http.get` + `JSON.parse`
 * (docs/performance.md#one-connection-where-the-tail-went).
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
 * Where the tail was: each answer split into the front's engine time for its query (the
 * front runs them one at a time, in the order sent, so the i-th pair's queries are the
 * engine times 2i and 2i+1) and the rest (the client, HTTP, the front's JS; for the shim
 * also the shim itself). Undefined when the front did not run exactly one query per answer.
 */
function engineSplit(engine: readonly number[], straight: readonly number[], viaShim: readonly number[]): string | undefined {
  if (engine.length !== 2 * straight.length || straight.length !== viaShim.length) return undefined;
  const ofDirect = straight.map((_, i) => engine[2 * i] ?? 0);
  const ofShim = viaShim.map((_, i) => engine[2 * i + 1] ?? 0);
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
  return `${side('shim', viaShim, ofShim)}; ${side('direct', straight, ofDirect)}`;
}

/** One route at one connection: PAIRS interleaved (direct, shim) pairs after a warm-up. */
async function oneRoute(front: Front, shim: BenchShim, direct: ClickHouseHandle, name: 'backlog' | 'pressure'): Promise<BenchLine> {
  const query = shim.shim.catalogue.current().queries.get(name);
  if (query === undefined) throw new Error(`no ${name} query in the catalogue`);
  const agent = oneSocket();
  const route = (i: number) => (name === 'backlog' ? `${shim.url}/keda/hunt-backlog` : `${shim.url}/keda/pressure?service=svc-${i % SERVICES}&hold=50`);
  const params = (i: number): Record<string, string> => (name === 'backlog' ? {} : { service: `svc-${i % SERVICES}` });
  try {
    for (let i = 0; i < 100; i++) {
      await timeDirect(direct, query, params(i));
      await timeSequentialGet(agent, route(i));
    }
    const viaShim: number[] = [];
    const straight: number[] = [];
    let notFresh = 0;
    await front.engineTimes(); // the warm-up's
    const watch = watchLoop();
    for (let i = 0; i < PAIRS; i++) {
      straight.push(await timeDirect(direct, query, params(i)));
      const got = await timeSequentialGet(agent, route(i));
      viaShim.push(got.ms);
      if (got.source !== 'fresh') notFresh += 1;
    }
    const loop = watch.stop();
    const engine = await front.engineTimes();
    const split = engineSplit(engine, straight, viaShim) ?? `engine times not paired (${engine.length} queries for ${PAIRS} pairs)`;
    const p50 = percentile(viaShim, 50);
    const p99 = percentile(viaShim, 99);
    const d50 = percentile(straight, 50);
    const d99 = percentile(straight, 99);
    const added = p50 - d50;
    const tail = p99 / p50;
    // Pairs where one side took 20 ms more than the other: a cause of the shim's own shows as an
    // excess on its side; load on the machine hits both sides alike.
    const slowerBy = (a: number[], b: number[]) => a.filter((x, i) => x - (b[i] ?? x) > 20).length;
    return {
      kind: 'figure',
      name: `shim, one connection, fresh ${name} (${int(PAIRS)} interleaved pairs, server mode, front in its own process)`,
      shortName: `shim, one connection, fresh ${name}`,
      headline: `p50 ${ms(p50)} (+${ms(added)} over direct), p99 ${ms(p99)} (${tail.toFixed(2)}× p50)`,
      measured:
        `p50 ${ms(p50)}, p99 ${ms(p99)} (${tail.toFixed(2)}× p50); added p50 ${ms(added)}${notFresh ? `; ${notFresh} not fresh` : ''}; ` +
        `${slowerBy(viaShim, straight)} pairs shim ≥ 20 ms slower, ${slowerBy(straight, viaShim)} direct ≥ 20 ms slower; ` +
        `event loop delay p99 ${ms(loop.delayP99Ms)}, max ${ms(loop.delayMaxMs)}; ${loop.gcs} GCs (longest ${ms(loop.gcMaxMs)}); ` +
        `at the front, ${split}; ${load()}`,
      baseline: `the same SQL straight to the front (the shim's client settings): p50 ${ms(d50)}, p99 ${ms(d99)} (${(d99 / d50).toFixed(2)}× p50)`,
      goal: 'added p50 ≤ 1 ms, p99 ≤ 1.3× p50, every answer fresh',
      outcome: goal(added <= 1 && tail <= 1.3 && notFresh === 0),
    };
  } finally {
    agent.destroy();
  }
}

/** SERVICES distinct pressure keys one at a time, against as many one-by-one queries sent directly. */
async function distinctKeys(shim: BenchShim, direct: ClickHouseHandle): Promise<BenchLine[]> {
  const query = shim.shim.catalogue.current().queries.get('pressure');
  if (query === undefined) throw new Error('no pressure query in the catalogue');
  const agent = oneSocket();
  let shimMs = 0;
  let directMs = 0;
  let notFresh = 0;
  const before = shim.queriesStarted();
  try {
    for (let from = 0; from < SERVICES; from += CHUNK) {
      let t0 = performance.now();
      for (let i = from; i < from + CHUNK; i++) await timeDirect(direct, query, { service: `svc-${i}` });
      directMs += performance.now() - t0;
      t0 = performance.now();
      for (let i = from; i < from + CHUNK; i++) if ((await timeSequentialGet(agent, `${shim.url}/keda/pressure?service=svc-${i}&hold=50`)).source !== 'fresh') notFresh += 1;
      shimMs += performance.now() - t0;
    }
  } finally {
    agent.destroy();
  }
  const started = shim.queriesStarted() - before;
  const ratio = shimMs / directMs;
  const lines: BenchLine[] = [
    {
      kind: 'figure',
      name: `shim, ${int(SERVICES)} distinct pressure keys one at a time (one connection, server mode)`,
      shortName: `shim, ${int(SERVICES)} distinct pressure keys one at a time`,
      headline: `${(shimMs / 1000).toFixed(1)} s, ${ratio.toFixed(2)}× as many one-by-one queries sent directly`,
      measured: `${(shimMs / 1000).toFixed(2)} s (${ratio.toFixed(2)}×), ${int(started)} ClickHouse queries${notFresh ? `, ${notFresh} not fresh` : ''}; ${load()}`,
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
    const burstBefore = shim.queriesStarted();
    const answers = await Promise.all(Array.from({ length: 1_000 }, (_, i) => timeGet(burstAgent, `${shim.url}/keda/pressure?service=svc-${i}&hold=50`)));
    const queries = shim.queriesStarted() - burstBefore;
    const fresh = answers.filter((a) => a.source === 'fresh').length;
    lines.push({
      kind: 'figure',
      name: 'shim, 1 000 distinct pressure keys at once (same shim, server mode)',
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

async function withShim<T>(run: (shim: BenchShim, direct: ClickHouseHandle, front: Front) => Promise<T>): Promise<T> {
  const front = await startFront();
  const direct = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: front.url }).clickhouse);
  const shim = await startBenchShim(`queries:\n  pressure:\n    database: ${DATABASE}\n`, { url: front.url }, { DFE_CLICKHOUSE_DATA_DATABASE: DATABASE });
  try {
    return await run(shim, direct, front);
  } finally {
    await shim.close();
    await direct.close();
    await front.stop();
  }
}

export function benchOneConnection(): Promise<BenchLine[]> {
  return withShim(async (shim, direct, front) => [await oneRoute(front, shim, direct, 'backlog'), await oneRoute(front, shim, direct, 'pressure')]);
}

export function benchDistinctKeys(): Promise<BenchLine[]> {
  return withShim(distinctKeys);
}
