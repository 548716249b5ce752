import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { formatLine, summary, type BenchLine } from './report.js';

/** Writes the last run's figures into docs/performance.md, with the command that produced them. */
export function writePerformanceDoc(
  path: string,
  lines: readonly BenchLine[],
  context: { target: string; seconds: number; loadAtStart: number },
): void {
  const cpu = cpus();
  const text = `# Performance

Figures of the last \`npm run bench\` (bench/run.ts), each with the baseline measured in the
same run and its goal. Everything runs on loopback on this machine; numbers move with machine
load (CI and development machines have 2 cores shared with other work), so read the ratios and
the bounds, not the absolute values.

- command: \`npm run bench\` (= \`npm run build && node dist/bench/run.js\`)
- run: ${new Date().toISOString()}, ${Math.round(context.seconds)} s
- machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, Node ${process.version}, load average at start ${context.loadAtStart.toFixed(1)}, at end ${(loadavg()[0] ?? 0).toFixed(1)}
- ClickHouse for the shim's fresh/single-flight figures: ${context.target}; the due query, the
  100 000-values figure and the runner use the embedded engine (chdb)

\`\`\`
${lines.map(formatLine).join('\n')}
${summary(lines)}
\`\`\`

How each figure is measured:

- **cached value**: throughput from autocannon (a worker thread, 10 connections) on \`/q/cached\`
  (\`fresh_for_seconds: 86400\`) and on a bare Fastify route answering the same JSON, alternated
  twice, each keeping its best run; latency from 2 000 sequential requests to each, interleaved
  and timed with \`performance.now()\` (autocannon records whole milliseconds).
- **fresh value**: sequential requests, interleaved with the same query run directly through
  \`@clickhouse/client\` configured as the shim's (\`openClickHouse\`); "added" is the difference
  of the medians, and includes the HTTP hop to the shim.
- **ClickHouse hung**: the shim's ClickHouse is a loopback listener that accepts and never
  answers (test/helpers/faults.ts); p100 is autocannon's maximum latency.
- **single-flight**: 100 concurrent requests on a 0.3 s query; the shim's own counter of
  started queries and, on the server, \`system.query_log\`.
- **distinct parameter values**: RSS of the bench process (shim and embedded engine together)
  after the first 10 000 values and after all 100 000; the cache's LRU bound is 10 000 keys.
- **runner**: \`startRunner\` with the loop driven by the bench; round trips are calls on the
  coordination client (hunt statements run on their own sessions); lateness is the ClickHouse
  clock at the planning tick minus the fire, over won claims.
- **due query**: \`dueCountSql\` (argMax, the product's form) against the same decision written
  with FINAL (bench/due-final-sql.ts, bench only), on tables holding two versions of part of
  their rows in separate parts; both must count the same hunts.
- **smoothing**: the pure planner (docs/smoothing.md) on seeded synthetic fleets
  (bench/smoothing-fleet.ts: periods 300/900/3600 s, log-normal costs, Δ 30 s, CPU sized to 30%
  busy on average, memory cap 2.5 × the mean concurrent memory). Flatness with every hunt on its
  period boundary and with the hashed offsets of docs/schedule.md#phase-offset (the baseline), then after
  planning from the hashed offsets until a cycle finds no move. The plan is replayed move by
  move on \`buildCurve\` to check max_step, a falling J and the memory cap. One cycle is the
  whole \`planCycle\` call, timed from the hashed start and on the settled fleet (every hunt
  tried, nothing moved: the worst case), as CPU time of the process (the goal) and wall time.
`;
  writeFileSync(path, text);
}
