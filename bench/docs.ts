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
  (\`fresh_for_seconds: 86400\`) and on a bare Fastify route answering the same JSON, seven
  interleaved pairs of 3 s (bare, shim, bare, shim, …); the ratio is the median of the seven
  pair ratios, so a burst of other work that slows one pair is outvoted; latency from seven
  rounds of 1 000 sequential requests to each, interleaved and timed with
  \`performance.now()\` (autocannon records whole milliseconds); a p99 is the tail of ten
  requests a round, so the p99 ratio is the median of the seven rounds' ratios. What keeps the cached path close to bare Fastify is described
  under "The cached path" below.
- **pod sizing** (bench/pod-bench.ts): the shim as its own process, as in a pod
  (\`dfe-keda-shim --clickhouse-url …\`, server mode against clickhouse-server on loopback),
  beside a bare Fastify process (bench/bare-server.ts) measured in the same run. *Start*: from
  \`spawn()\` to the first 200 of \`/readyz\` (polled every 5 ms), three interleaved repeats,
  medians; *idle RSS*: \`VmRSS\` from \`/proc\` 3 s after ready. *Under load*: 100 polls/s to
  each process for 5 minutes (\`node dist/bench/run.js pod --soak-seconds=60\` for a quick
  run, which does not rewrite this page); the shim's polls alternate a cached query and one that
  asks ClickHouse every time, and \`/metrics\` is scraped every 15 s. RSS is sampled every 5 s;
  V8 grows its heap for a while and then holds it, so *flat* means the second half of the run
  sets no peak above the first half's (+5 MB); CPU is the process's user + system time over the
  run, in millicores. *Install*: \`package.json\` and \`package-lock.json\` in a temp dir,
  \`npm install --omit=dev --ignore-scripts\` as the image does, plus the package's own files;
  bytes of files and \`du\` (whole blocks). The chart's default requests and limits
  (charts/dfe-keda-shim/values.yaml) are taken from these figures.
- **tracing on vs off** (bench/trace-bench.ts): two \`dfe-keda-shim\` processes, one with
  \`OTEL_EXPORTER_OTLP_ENDPOINT\` set (default sampler: parent-based 1 %; spans to a loopback
  OTLP receiver that decodes them, so the sampled share is counted) and one without, the same
  cached query, seven interleaved pairs of 3 s (off, on, …); the ratio is the median of the
  pair ratios. Beside it, the CPU each process spent per 1 000 polls (user + system from
  \`/proc\`), steadier than req/s when other work takes cores from one side of a pair.
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
- **due query**: \`dueCountSql\` (the product's form, docs/tables.md#the-due-query) against the
  same decision written the obvious way with FINAL on every table (bench/due-final-sql.ts, bench
  only), on tables holding two versions of part of their rows in separate parts. Both count the
  same hunts at one pinned clock reading; then each is timed at the server's clock in
  interleaved pairs (order flipped every pair, two warm-ups each), and the ratio is the median
  of the per-pair ratios, in wall time and in CPU time of the bench process (the embedded
  engine runs in it, so other jobs on the machine do not count against either form). The
  no-request figure times the product on a \`hunt_run\` holding only finished runs against
  the same query with its run-now part cut out. The load average at each line is the
  machine's 1-minute figure when it was measured.
- **smoothing**: the pure planner (docs/smoothing.md) on seeded synthetic fleets
  (bench/smoothing-fleet.ts: periods 300/900/3600 s, log-normal costs, Δ 30 s, CPU sized to 30%
  busy on average, memory cap 2.5 × the mean concurrent memory). Flatness with every hunt on its
  period boundary and with the hashed offsets of docs/schedule.md#phase-offset (the baseline), then after
  planning from the hashed offsets until a cycle finds no move. The plan is replayed move by
  move on \`buildCurve\` to check max_step, a falling J and the memory cap. One cycle is the
  whole \`planCycle\` call, timed from the hashed start and on the settled fleet (every hunt
  tried, nothing moved: the worst case), as CPU time of the process (the goal) and wall time.

## The cached path

A cached answer does no more per request than a bare Fastify route, apart from the cache
lookup itself. A CPU profile (\`node --cpu-prof\` under autocannon) showed what used to be
extra, and each is gone:

- the body: the query routes declare their 200 response, so Fastify serialises it with a
  compiled fast-json-stringify function instead of walking the object with \`JSON.stringify\`
  (same bytes: test/shim/bodies.test.ts compares every source);
- the metrics: prom-client hashes and validates the label set on every \`inc\`/\`set\` (its
  \`labels()\` children too), so \`requests_total\` and \`served_value_age_seconds\` are kept
  as plain numbers per query and folded into the series when \`/metrics\` is collected;
- the request logger: Fastify makes a pino child per request, serialising its bindings
  through the redaction paths; the shim's is made on its first log call, which on the
  cached path never comes;
- the hooks: \`onSend\` is callback-style (no promise per answer), and the debug
  "answered" line's hook exists only when the level is \`debug\`;
- the key: the sorted declared-parameter names (and the whole key of a query without
  parameters) are built once per compiled query, not per request.
`;
  writeFileSync(path, text);
}
