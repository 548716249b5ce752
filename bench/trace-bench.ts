import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { otlpReceiver } from '../test/telemetry/otlp-receiver.js';
import { runLoad, type LoadResult } from './load.js';
import { spawnServer, type ServerProcess } from './processes.js';
import { goal, int, median, type BenchLine } from './report.js';
import type { BenchTarget } from './target.js';

/**
 * What tracing costs on the poll loop's hot path (docs/operations.md#traces):
 * the cached answer, with tracing on at the default sampler (parent-based 1 %,
 * OTLP exporter pointed at a loopback sink) against the same shim with tracing
 * off, in the same run. Tracing is process-wide, so each side is its own
 * `dfe-keda-shim` process; pairs are interleaved (off, on, off, on …) and the
 * ratio is the median of the per-pair ratios, as in shim-bench.ts. The CPU
 * each process spent per poll is reported beside it (not judged).
 */
const SHIM_CLI = new URL('../src/cli/shim.js', import.meta.url).pathname;
const ROUNDS = 7;
const LOAD_SECONDS = 3;
const CONNECTIONS = 10;
const GOAL_RATIO = 0.95;

const OVERRIDE = `queries:
  cached:
    database: default
    sql: "SELECT 42 AS value"
    fresh_for_seconds: 86400
`;

export async function benchTracing(target: BenchTarget): Promise<BenchLine[]> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-bench-trace-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, OVERRIDE);
  const sink = await otlpReceiver();
  // A server target is shared; without one each process opens an embedded engine of its own.
  const clickhouse = (name: string): Record<string, string> =>
    target.kind === 'server'
      ? { DFE_CLICKHOUSE_URL: target.url }
      : { DFE_CLICKHOUSE_BACKEND: 'embedded', DFE_EMBEDDED_PATH: join(dir, `ch-${name}`) };
  const args = ['--host', '127.0.0.1', '--port', '{port}', '--override', overridePath];
  const base = { LOG_LEVEL: 'warn', NODE_ENV: 'production' };
  let off: ServerProcess | undefined;
  let on: ServerProcess | undefined;
  try {
    off = await spawnServer(SHIM_CLI, args, { ...base, ...clickhouse('off') });
    on = await spawnServer(SHIM_CLI, args, { ...base, ...clickhouse('on'), OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_BSP_SCHEDULE_DELAY: '1000' });
    const offUrl = `${off.url}/q/cached`;
    const onUrl = `${on.url}/q/cached`;
    await runLoad(offUrl, { connections: CONNECTIONS, durationSeconds: 1 }); // warm-up, fills each cache
    await runLoad(onUrl, { connections: CONNECTIONS, durationSeconds: 1 });
    const offRuns: LoadResult[] = [];
    const onRuns: LoadResult[] = [];
    // CPU the shim process spent per poll: steadier than req/s on a busy machine, where a
    // neighbour's burst takes cores from one side of a pair.
    const offCpu: number[] = [];
    const onCpu: number[] = [];
    const measured = async (shim: ServerProcess, url: string, runs: LoadResult[], cpu: number[]) => {
      const before = shim.cpuMs();
      const run = await runLoad(url, { connections: CONNECTIONS, durationSeconds: LOAD_SECONDS });
      runs.push(run);
      cpu.push((1000 * (shim.cpuMs() - before)) / Math.max(1, run.requests));
    };
    for (let round = 0; round < ROUNDS; round++) {
      await measured(off, offUrl, offRuns, offCpu);
      await measured(on, onUrl, onRuns, onCpu);
    }
    // The exporter sends every second: what it sent is the sampled share of the polls.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const rps = (runs: LoadResult[]) => median(runs.map((r) => r.rps));
    const ratio = median(onRuns.map((r, i) => r.rps / (offRuns[i]?.rps ?? Number.NaN)));
    const non2xx = [...onRuns, ...offRuns].reduce((n, r) => n + r.non2xx + r.errors, 0);
    const cpuRatio = median(onCpu.map((c, i) => c / (offCpu[i] ?? Number.NaN)));
    const polls = onRuns.reduce((n, r) => n + r.requests, 0);
    const roots = sink.spans.filter((s) => s.parentSpanId === '').length;
    return [
      {
        kind: 'figure',
        name: `tracing on (default sampler, parent-based 1 %; OTLP to a loopback sink) vs off, cached value (${CONNECTIONS} connections, ${ROUNDS} interleaved pairs × ${LOAD_SECONDS} s, median of the pair ratios)`,
        measured:
          `${int(rps(onRuns))} req/s (${ratio.toFixed(2)}×; runs ${onRuns.map((r) => int(r.rps)).join(', ')}), ` +
          `CPU ${median(onCpu).toFixed(1)} ms per 1,000 polls (${cpuRatio.toFixed(2)}×), ` +
          `${int(roots)} poll spans exported of ≥ ${int(polls)} polls (${((100 * roots) / Math.max(1, polls)).toFixed(2)} %), ${non2xx} non-2xx`,
        baseline:
          `tracing off, same shim: ${int(rps(offRuns))} req/s (runs ${offRuns.map((r) => int(r.rps)).join(', ')}), ` +
          `CPU ${median(offCpu).toFixed(1)} ms per 1,000 polls`,
        goal: `≥ ${GOAL_RATIO}× throughput, all 2xx`,
        outcome: goal(ratio >= GOAL_RATIO && non2xx === 0),
      },
    ];
  } finally {
    await on?.stop();
    await off?.stop();
    await sink.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
