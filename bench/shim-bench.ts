import { loadavg } from 'node:os';
import { Agent, request } from 'undici';
import type { ClickHouseClient } from '@clickhouse/client';
import { blackHoleServer } from '../test/helpers/faults.js';
import { runLoad, type LoadResult } from './load.js';
import { goal, int, median, ms, percentile, spread, type BenchLine } from './report.js';
import { startBareFastify, startBenchShim } from './servers.js';
import type { BenchTarget } from './target.js';

/** The shim's HTTP figures (docs/failsafe.md, docs/api.md): cached, fresh, hung ClickHouse, single-flight. */
const LOAD_SECONDS = 3;
/**
 * Interleaved repeats of baseline and shim (B A B A …). The ratio is the median of the
 * per-round ratios: each pair ran back to back, so a burst of other work on the machine moves
 * both sides of one pair and is outvoted by the other rounds.
 */
const ROUNDS = 7;
const CONNECTIONS = 10;
/** Sequential latency: rounds of pairs (shim, bare), p99 ratio = median of the rounds'. */
const LATENCY_ROUNDS = 7;
const LATENCY_PER_ROUND = 1_000;
const HUNG_CONNECTIONS = 10;

function shimTarget(target: BenchTarget) {
  return target.kind === 'server' ? { url: target.url } : target.direct;
}

export async function benchCached(target: BenchTarget): Promise<BenchLine[]> {
  const shim = await startBenchShim(
    `queries:
  cached:
    database: default
    sql: "SELECT 42 AS value"
    fresh_for_seconds: 86400
`,
    shimTarget(target),
  );
  const bare = await startBareFastify({ value: 42, source: 'fresh', age_seconds: 0 });
  const shimUrl = `${shim.url}/q/cached`;
  const bareUrl = `${bare.url}/q/cached`;
  try {
    await runLoad(shimUrl, { connections: CONNECTIONS, durationSeconds: 1 }); // warm-up
    await runLoad(bareUrl, { connections: CONNECTIONS, durationSeconds: 1 });
    // Throughput: alternate the two (B A B A B A) and compare medians, so a burst of
    // other work on the machine does not decide the ratio.
    const base: LoadResult[] = [];
    const got: LoadResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      base.push(await runLoad(bareUrl, { connections: CONNECTIONS, durationSeconds: LOAD_SECONDS }));
      got.push(await runLoad(shimUrl, { connections: CONNECTIONS, durationSeconds: LOAD_SECONDS }));
    }
    const rps = (runs: LoadResult[]) => median(runs.map((r) => r.rps));
    const ratios = got.map((r, i) => r.rps / (base[i]?.rps ?? Number.NaN));
    const ratio = median(ratios);
    const non2xx = got.reduce((n, r) => n + r.non2xx + r.errors, 0);
    // Latency: sequential, interleaved, timed with performance.now() (autocannon keeps whole ms).
    const latency = await interleavedLatency(shimUrl, bareUrl, LATENCY_ROUNDS, LATENCY_PER_ROUND);
    const { p99Ratio } = latency;
    return [
      {
        kind: 'figure',
        name: `shim, cached value (${CONNECTIONS} connections, ${ROUNDS} interleaved pairs × ${LOAD_SECONDS} s, median of the pair ratios; latency: ${LATENCY_ROUNDS} rounds × ${int(LATENCY_PER_ROUND)} sequential pairs, p99 ratio = median of the rounds')`,
        measured:
          `${int(rps(got))} req/s (${ratio.toFixed(2)}×; runs ${got.map((r) => int(r.rps)).join(', ')}), ` +
          `p50 ${ms(latency.a.p50)}, p99 ${ms(latency.a.p99)} (${p99Ratio.toFixed(2)}×), ${non2xx} non-2xx; load ${(loadavg()[0] ?? 0).toFixed(1)}`,
        baseline:
          `bare Fastify route, same JSON: ${int(rps(base))} req/s (runs ${base.map((r) => int(r.rps)).join(', ')}), ` +
          `p50 ${ms(latency.b.p50)}, p99 ${ms(latency.b.p99)}`,
        goal: '≥ 0.95× throughput, p99 ≤ 1.1×, all 2xx',
        outcome: goal(ratio >= 0.95 && p99Ratio <= 1.1 && non2xx === 0),
        shortName: 'shim, cached value',
        headline: `${int(rps(got))} req/s, ${ratio.toFixed(2)}× a bare Fastify route (median of ${ROUNDS} pairs); p99 ${p99Ratio.toFixed(2)}×`,
        spreads: [spread(ratios, 'throughput ratio', '×'), spread(latency.p99Ratios, 'p99 ratio', '×'), spread(got.map((r) => r.rps), 'shim', 'req/s')],
      },
    ];
  } finally {
    await shim.close();
    await bare.app.close();
  }
}

/**
 * p50/p99 of sequential GETs on each of two URLs, alternating, in `rounds` rounds of `perRound`
 * pairs. A p99 is the tail of a few requests, so one GC pause or scheduler hiccup moves it:
 * `p99Ratio` is the median over the rounds of a's p99 / b's p99, the way the throughput ratio is.
 */
async function interleavedLatency(aUrl: string, bUrl: string, rounds: number, perRound: number) {
  const agent = new Agent({ connections: 1 });
  const a: number[] = [];
  const b: number[] = [];
  const ratios: number[] = [];
  try {
    for (let i = 0; i < 100; i++) await timeGet(agent, aUrl).then(() => timeGet(agent, bUrl)); // warm-up
    for (let round = 0; round < rounds; round++) {
      const ra: number[] = [];
      const rb: number[] = [];
      for (let i = 0; i < perRound; i++) {
        ra.push((await timeGet(agent, aUrl)).ms);
        rb.push((await timeGet(agent, bUrl)).ms);
      }
      ratios.push(percentile(ra, 99) / percentile(rb, 99));
      a.push(...ra);
      b.push(...rb);
    }
  } finally {
    await agent.close();
  }
  const stats = (xs: number[]) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99) });
  return { a: stats(a), b: stats(b), p99Ratio: median(ratios), p99Ratios: ratios };
}

/**
 * The same query through the same call the shim makes (`exec`, which a server client sends
 * with Node's http: src/clickhouse/server-exec.ts), so the difference is the shim's own work.
 */
async function timeDirect(client: ClickHouseClient, query: string): Promise<number> {
  const started = performance.now();
  const { stream } = await client.exec({
    query: `${query}\nFORMAT JSONCompact`,
    clickhouse_settings: { max_execution_time: 5, output_format_json_quote_denormals: 1 },
  });
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  JSON.parse(Buffer.concat(chunks).toString('utf8'));
  return performance.now() - started;
}

async function timeGet(agent: Agent, url: string): Promise<{ ms: number; status: number; source: string }> {
  const started = performance.now();
  const res = await request(url, { dispatcher: agent });
  const body = (await res.body.json()) as { source?: string };
  return { ms: performance.now() - started, status: res.statusCode, source: body.source ?? '' };
}

export async function benchFresh(target: BenchTarget): Promise<BenchLine[]> {
  const SQL = 'SELECT 42 AS value';
  const N = 400;
  const shim = await startBenchShim(`queries:\n  fresh:\n    database: default\n    sql: "${SQL}"\n`, shimTarget(target));
  const agent = new Agent({ connections: 1 });
  try {
    const direct: number[] = [];
    const viaShim: number[] = [];
    const notFresh: string[] = [];
    for (let i = 0; i < 50; i++) {
      await timeDirect(target.direct.client, SQL);
      await timeGet(agent, `${shim.url}/q/fresh`);
    }
    // Interleaved, so both see the same machine load.
    for (let i = 0; i < N; i++) {
      direct.push(await timeDirect(target.direct.client, SQL));
      const got = await timeGet(agent, `${shim.url}/q/fresh`);
      viaShim.push(got.ms);
      if (got.status !== 200 || got.source !== 'fresh') notFresh.push(`${got.status} ${got.source}`);
    }
    const added = percentile(viaShim, 50) - percentile(direct, 50);
    return [
      {
        kind: 'figure',
        name: `shim, fresh value (sequential, ${N} requests)`,
        measured: `p50 ${ms(percentile(viaShim, 50))}, p99 ${ms(percentile(viaShim, 99))}; added p50 ${ms(added)}${notFresh.length ? `; ${notFresh.length} not fresh` : ''}`,
        baseline: `same query direct through the shim's client (openClickHouse, exec): p50 ${ms(percentile(direct, 50))}, p99 ${ms(percentile(direct, 99))}`,
        goal: 'added latency ≤ 1 ms p50, every answer fresh',
        outcome: goal(added <= 1 && notFresh.length === 0),
        shortName: 'shim, fresh value',
        headline: `+${ms(added)} p50 over the same query direct (${ms(percentile(viaShim, 50))} vs ${ms(percentile(direct, 50))}, ${N} sequential)`,
      },
    ];
  } finally {
    await agent.close();
    await shim.close();
  }
}

export async function benchHung(): Promise<BenchLine[]> {
  const DEADLINE_MS = 500;
  const hole = await blackHoleServer();
  const shim = await startBenchShim(
    `queries:\n  hung:\n    database: default\n    sql: "SELECT 42 AS value"\n    deadline_ms: ${DEADLINE_MS}\n    timeout_seconds: 2\n`,
    { url: hole.url },
  );
  try {
    const got = await runLoad(`${shim.url}/q/hung`, { connections: HUNG_CONNECTIONS, durationSeconds: 5 });
    return [
      {
        kind: 'figure',
        name: `shim, ClickHouse hung (black-hole listener, deadline_ms ${DEADLINE_MS}, ${HUNG_CONNECTIONS} connections, 5 s)`,
        measured: `${got.requests} answers, ${got.non2xx} non-2xx, ${got.errors} errors, p50 ${got.p50Ms} ms, p100 ${got.maxMs} ms`,
        baseline: `deadline_ms + 50 = ${DEADLINE_MS + 50} ms`,
        goal: 'every answer 200, p100 ≤ deadline_ms + 50 ms',
        outcome: goal(got.non2xx === 0 && got.errors === 0 && got.requests > 0 && got.maxMs <= DEADLINE_MS + 50),
        shortName: 'shim, ClickHouse hung',
        headline: `${got.requests} answers, ${got.non2xx + got.errors} not 200, p100 ${got.maxMs} ms (deadline_ms ${DEADLINE_MS})`,
      },
    ];
  } finally {
    await shim.close();
    await hole.close();
  }
}

export async function benchSingleFlight(target: BenchTarget): Promise<BenchLine[]> {
  const CONCURRENT = 100;
  const marker = 'single_flight_probe';
  const shim = await startBenchShim(
    `queries:\n  sf:\n    database: default\n    sql: "SELECT 42 + sleep(0.3) AS ${marker}"\n    deadline_ms: 2000\n    timeout_seconds: 5\n`,
    shimTarget(target),
  );
  const agent = new Agent({ connections: CONCURRENT });
  try {
    const before = shim.queriesStarted();
    const answers = await Promise.all(Array.from({ length: CONCURRENT }, () => timeGet(agent, `${shim.url}/q/sf`)));
    const started = shim.queriesStarted() - before;
    const atServer = target.kind === 'server' ? await target.countQueries(marker) : undefined;
    const fresh = answers.filter((a) => a.status === 200 && a.source === 'fresh').length;
    return [
      {
        kind: 'figure',
        name: `shim, ${CONCURRENT} concurrent identical requests`,
        measured:
          `${started} ClickHouse quer${started === 1 ? 'y' : 'ies'} started by the shim` +
          (atServer === undefined ? '' : `, ${atServer} finished at the server (system.query_log)`) +
          `; ${fresh}/${CONCURRENT} answered fresh`,
        baseline: `${CONCURRENT} requests`,
        goal: '1 query',
        outcome: goal(started === 1 && (atServer === undefined || atServer === 1) && fresh === CONCURRENT),
        shortName: `shim, ${CONCURRENT} concurrent identical requests`,
        headline: `${started} ClickHouse quer${started === 1 ? 'y' : 'ies'}${atServer === undefined ? '' : ` (${atServer} in system.query_log)`}; ${fresh}/${CONCURRENT} fresh`,
      },
    ];
  } finally {
    await agent.close();
    await shim.close();
  }
}
