import { Agent, request } from 'undici';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { createOtelGaugeTable, insertGaugePoints } from '../src/pressure/otel-table.js';
import { PRESSURE_METRIC } from '../src/pressure/rule.js';
import { QUERY_DEFAULTS } from '../src/catalogue/types.js';
import { stallingProxy } from '../test/helpers/faults.js';
import { startEngineFront, type EngineFront } from '../src/clickhouse/http-front.js';
import { goal, int, ms, percentile, type BenchLine } from './report.js';
import { startBenchShim, type BenchShim } from './servers.js';

/**
 * Issue 18's burst (docs/failsafe.md#admission, docs/catalogue.md#batch): KEDA's
 * poll loops aligned after an operator restart, one pressure key per service,
 * all at once against a healthy engine. Embedded, and server mode (the shim's
 * HTTP client and a server's admission defaults) through a counting HTTP front
 * on the same engine. Same-run baseline: the same burst with the batch form
 * switched off (`batch: null`), admission alone.
 */
const SERVICES = 1_000;
const STALLED = 100;
const DATABASE = 'bench_burst';
const DEADLINE_MS = QUERY_DEFAULTS.deadlineMs;
const MARKER = 'stall_marker';

interface Burst {
  readonly fresh: number;
  readonly notFresh: Readonly<Record<string, number>>;
  readonly p50: number;
  readonly p100: number;
  /** ClickHouse queries the shim started for the burst. */
  readonly started: number;
}

async function timedGet(agent: Agent, url: string): Promise<{ ms: number; status: number; source: string }> {
  const t0 = performance.now();
  const res = await request(url, { dispatcher: agent, headersTimeout: 30_000, bodyTimeout: 30_000 });
  const body = (await res.body.json()) as { source?: string };
  return { ms: performance.now() - t0, status: res.statusCode, source: body.source ?? `http ${res.statusCode}` };
}

/** Fires one GET per service at once (each on its own connection, as KEDA's loops do). */
async function burst(shim: BenchShim, round: string, extra: () => Promise<unknown>[] = () => []): Promise<Burst> {
  const agent = new Agent({ connections: SERVICES + STALLED + 10, keepAliveTimeout: 10_000 });
  try {
    const before = shim.queriesStarted();
    const side = extra();
    const answers = await Promise.all(Array.from({ length: SERVICES }, (_, i) => timedGet(agent, `${shim.url}/keda/pressure?service=svc-${i}&hold=70&round=${round}`)));
    await Promise.all(side);
    const notFresh: Record<string, number> = {};
    for (const a of answers) if (a.source !== 'fresh') notFresh[a.source] = (notFresh[a.source] ?? 0) + 1;
    const times = answers.map((a) => a.ms);
    return {
      fresh: answers.filter((a) => a.status === 200 && a.source === 'fresh').length,
      notFresh,
      p50: percentile(times, 50),
      p100: percentile(times, 100),
      started: shim.queriesStarted() - before,
    };
  } finally {
    await agent.close();
  }
}

const show = (b: Burst) =>
  `${int(b.fresh)}/${int(SERVICES)} fresh${Object.keys(b.notFresh).length > 0 ? ` (${Object.entries(b.notFresh).map(([s, n]) => `${n} ${s}`).join(', ')})` : ''}, ` +
  `${int(b.started)} ClickHouse queries, p50 ${ms(b.p50)}, p100 ${ms(b.p100)}`;

function overrideYaml(batch: boolean, stalled = false): string {
  return (
    `queries:\n  pressure:\n    database: ${DATABASE}\n${batch ? '' : '    batch: null\n'}` +
    (stalled ? `  stalled_keys:\n    params: [k]\n    sql: "SELECT length({k:String}) AS ${MARKER}"\n    deadline_ms: 500\n    timeout_seconds: 5\n` : '')
  );
}

async function seed(embedded: ClickHouseHandle): Promise<void> {
  await embedded.client.command({ query: `CREATE DATABASE IF NOT EXISTS ${DATABASE}` });
  await createOtelGaugeTable(embedded.client, DATABASE);
  const nowNs = BigInt(Date.now()) * 1_000_000n;
  // Readings for the next 10 minutes' windows: the burst reads the last 60 s.
  const points = Array.from({ length: SERVICES }, (_, i) => ({ serviceName: `svc-${i}`, metricName: PRESSURE_METRIC, value: i % 100, timeUnixNs: nowNs }));
  await insertGaugePoints(embedded.client, DATABASE, points);
}

/** One mode: the batched burst and its same-run baseline (batch off). */
async function mode(name: string, start: (yaml: string) => Promise<BenchShim>, queriesAtEngine?: () => number): Promise<BenchLine> {
  const baseShim = await start(overrideYaml(false));
  let base: Burst;
  try {
    await burst(baseShim, 'warm');
    base = await burst(baseShim, 'base');
  } finally {
    await baseShim.close();
  }
  const shim = await start(overrideYaml(true));
  let got: Burst;
  let atEngine: number | undefined;
  try {
    await burst(shim, 'warm');
    const engineBefore = queriesAtEngine?.();
    got = await burst(shim, 'batched');
    atEngine = engineBefore === undefined ? undefined : (queriesAtEngine?.() ?? 0) - engineBefore;
  } finally {
    await shim.close();
  }
  const queries = Math.max(got.started, atEngine ?? 0);
  return {
    kind: 'figure',
    name: `shim, ${int(SERVICES)} distinct services polled at once (${name}, deadline_ms ${DEADLINE_MS})`,
    measured: `${show(got)}${atEngine === undefined ? '' : ` (${int(atEngine)} reached the engine)`}`,
    baseline: `batch form off, admission alone: ${show(base)}`,
    goal: `${int(SERVICES)} fresh, ≤ 4 ClickHouse queries, p100 ≤ deadline_ms`,
    outcome: goal(got.fresh === SERVICES && queries <= 4 && got.p100 <= DEADLINE_MS),
  };
}

export async function benchBurst(embedded: ClickHouseHandle): Promise<BenchLine[]> {
  await seed(embedded);
  let front: EngineFront | undefined;
  try {
    const lines: BenchLine[] = [];
    lines.push(await mode('embedded engine', (yaml) => startBenchShim(yaml, embedded, { DFE_CLICKHOUSE_BACKEND: 'embedded' })));
    front = await startEngineFront(embedded);
    const url = front.url;
    lines.push(await mode('server mode through a counting HTTP front', (yaml) => startBenchShim(yaml, { url }), () => front?.queries() ?? 0));
    lines.push(await stalledBeside(front));
    return lines;
  } finally {
    await front?.close();
    await embedded.client.command({ query: `DROP DATABASE IF EXISTS ${DATABASE}` }).catch(() => undefined);
  }
}

/** 100 stalled keys (a proxy that answers half a body, then nothing) and 1 000 healthy keys, all at once. */
async function stalledBeside(front: EngineFront): Promise<BenchLine> {
  const proxy = await stallingProxy(front.url, MARKER);
  const shim = await startBenchShim(overrideYaml(true, true), { url: proxy.url });
  const agent = new Agent({ connections: STALLED + 10 });
  try {
    await burst(shim, 'warm');
    const stalledBefore = proxy.stalled();
    const got = await burst(shim, 'stalled', () =>
      Array.from({ length: STALLED }, (_, i) => timedGet(agent, `${shim.url}/q/stalled_keys?k=s${i}`)),
    );
    const stalled = proxy.stalled() - stalledBefore;
    return {
      kind: 'figure',
      name: `shim, ${STALLED} stalled keys + ${int(SERVICES)} healthy services at once (server mode, stalling proxy)`,
      measured: `${show(got)}; ${stalled} stalled queries held sockets`,
      baseline: `${STALLED} stalled keys of one query (at most its per-query share in flight)`,
      goal: 'every healthy service fresh',
      outcome: goal(got.fresh === SERVICES),
    };
  } finally {
    await agent.close();
    await shim.close();
    await proxy.close();
  }
}
