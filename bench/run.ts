import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openClickHouse } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { describeError } from '../src/errors.js';
import { writePerformanceDocs } from './docs.js';
import { benchBurst } from './burst-bench.js';
import { benchDueQuery } from './due-query.js';
import { benchGrpcCached, benchOpenStreams, benchRunNowPush } from './grpc-bench.js';
import { benchDistinctParams } from './memory-bench.js';
import { benchKeyFlood } from './key-flood-bench.js';
import { benchDistinctKeys, benchOneConnection } from './one-connection-bench.js';
import { benchNemesis } from './nemesis-bench.js';
import { benchOverCapacity } from './over-capacity-bench.js';
import { benchInstallSize, benchSoak, benchStartAndIdle } from './pod-bench.js';
import { formatLine, runPassed, summary, type BenchLine } from './report.js';
import { benchRunner } from './runner-bench.js';
import { benchCached, benchFresh, benchHung, benchSingleFlight } from './shim-bench.js';
import { benchSmoothing } from './smoothing-bench.js';
import { openBenchTarget } from './target.js';
import { benchTracing } from './trace-bench.js';

/**
 * `npm run bench`: every figure on loopback, bounded in count and time, each
 * printed with its same-run baseline and goal, then a summary; a full run writes the
 * figures to docs/performance.md, docs/performance.json and the README's table (bench/docs.ts).
 * A section that cannot run says why and the others go on. Exits 1 when any goal is not met
 * or any chosen section was skipped or failed, for a partial run too.
 */
type Section = { readonly name: string; readonly run: () => Promise<BenchLine[]> };

/**
 * `--soak-seconds=N` shortens the RSS-under-load figure for quick runs (default 300); at least
 * 30, so each half of the run holds three RSS samples (one every 5 s) to compare.
 */
function soakSeconds(args: readonly string[]): number {
  const flag = args.find((a) => a.startsWith('--soak-seconds='));
  if (flag === undefined) return 300;
  const n = Number(flag.slice('--soak-seconds='.length));
  if (!Number.isInteger(n) || n < 30) throw new Error(`--soak-seconds must be an integer ≥ 30, not ${flag}`);
  return n;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const soak = soakSeconds(args);
  const startedMs = Date.now();
  const loadAtStart = loadavg()[0] ?? 0;
  const embeddedPath = mkdtempSync(join(tmpdir(), 'dfe-bench-ch-'));
  const config = loadConfig({ DFE_EMBEDDED_PATH: embeddedPath, DFE_CLICKHOUSE_BACKEND: 'embedded' }).clickhouse;
  const embedded = await openClickHouse(config);
  const target = await openBenchTarget(embedded);
  console.log(`bench: shim ClickHouse = ${target.description}; embedded engine at ${embeddedPath}`);
  await embedded.client.command({ query: 'CREATE DATABASE IF NOT EXISTS bench_shim' });
  const sections: Section[] = [
    { name: 'shim, cached value', run: () => benchCached(target) },
    { name: 'shim, fresh value', run: () => benchFresh(target) },
    { name: 'shim, ClickHouse hung', run: () => benchHung() },
    { name: 'shim, single-flight', run: () => benchSingleFlight(target) },
    { name: 'shim, one connection fresh', run: () => benchOneConnection() },
    { name: 'shim, distinct keys one at a time', run: () => benchDistinctKeys() },
    { name: 'shim, burst of distinct services', run: () => benchBurst(embedded) },
    { name: 'shim, tracing on vs off', run: () => benchTracing(target) },
    { name: 'pod sizing, start and idle RSS', run: () => benchStartAndIdle(target) },
    { name: 'pod sizing, RSS under load', run: () => benchSoak(target, soak) },
    { name: 'pod sizing, install size', run: () => benchInstallSize() },
    { name: 'shim, distinct parameter values', run: () => benchDistinctParams(embedded, 'bench_shim') },
    { name: 'shim, key flood memory', run: () => benchKeyFlood(embedded, 'bench_shim') },
    { name: 'grpc, run-now push', run: () => benchRunNowPush(embedded) },
    { name: 'grpc, cached GetMetrics', run: () => benchGrpcCached(embedded) },
    { name: 'grpc, open streams', run: () => benchOpenStreams(embedded) },
    { name: 'runner', run: () => benchRunner(embedded, embeddedPath) },
    { name: 'due query', run: () => benchDueQuery(embedded.client) },
    { name: 'smoothing', run: () => benchSmoothing() },
    { name: 'coordination under a nemesis', run: () => benchNemesis() },
    { name: 'coordination over capacity', run: () => Promise.resolve(benchOverCapacity()) },
  ];
  // `node dist/bench/run.js runner due` runs only the sections whose names contain a word given.
  const only = args.filter((a) => !a.startsWith('--'));
  const chosen = only.length === 0 ? sections : sections.filter((s) => only.some((word) => s.name.includes(word)));
  const lines: BenchLine[] = [];
  try {
    if (chosen.length === 0) {
      console.error(`bench: no section matches ${only.join(', ')}; sections: ${sections.map((s) => s.name).join('; ')}`);
      return 2;
    }
    for (const section of chosen) {
      let got: BenchLine[];
      try {
        got = await section.run();
      } catch (err) {
        got = [{ kind: 'skipped', name: section.name, reason: `failed: ${describeError(err)}` }];
      }
      for (const line of got) {
        lines.push(line);
        console.log(formatLine(line));
      }
    }
  } finally {
    await target.close();
    await embedded.client.command({ query: 'DROP DATABASE IF EXISTS bench_shim' }).catch(() => undefined);
    await embedded.close();
    rmSync(embeddedPath, { recursive: true, force: true });
  }
  console.log(summary(lines));
  const passed = runPassed(lines);
  if (!passed) console.log('bench: FAILED (a goal not met, or a section skipped or failed): exit 1');
  // A partial or shortened run does not overwrite the documented figures.
  if (chosen.length !== sections.length || soak !== 300) return passed ? 0 : 1;
  const written = writePerformanceDocs(process.cwd(), lines, { target: target.description, seconds: (Date.now() - startedMs) / 1000, loadAtStart });
  console.log(`bench: figures written to ${written.join(', ')}`);
  return passed ? 0 : 1;
}

process.exitCode = await main();
