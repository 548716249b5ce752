import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { VerifyReport } from '../src/runner/verify-report.js';
import { goal, type BenchLine } from './report.js';

/**
 * The claim protocol under the nemesis (docs/operations.md#the-nemesis), in both claim modes:
 * `dfe-hunt-runner verify-coordination --nemesis pause,cpu,stall,kill` as its own process (it
 * holds its own embedded engine, with testkeeper for Keeper mode), 4 runner processes, 20 hunts
 * every second, lease 5 s, 45 s. Figures from its JSON report, counted from the tables:
 * - fires covered twice (overlapping windows and doubled hunt_run rows included) and missed
 *   fires: safety, goal 0 whatever the load;
 * - lateness (an owed fire to its run's output row, written by the run's hunt statement) against the progress bound of
 *   docs/runner.md, `poll × ceil(owed hunts / fleet capacity) + one run` (one run: the longest
 *   the same run measured). The p99 is held to that bound; the max to the bound plus what a
 *   fault may hold a fire for: one lease (a claim left by a stopped or killed runner) and the
 *   longest fault.
 */
const RUNNERS = 4;
const SECONDS = 45;
const LEASE_SECONDS = 5;
const FAULTS = 'pause,cpu,stall,kill';
const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const CLI = fileURLToPath(new URL('../src/cli/hunt-runner.js', import.meta.url));

interface Ran {
  readonly report: VerifyReport;
  readonly seed: number;
}

function runNemesis(claims: 'keeper' | 'tables', seed: number): Promise<Ran> {
  const dataDir = mkdtempSync(join(tmpdir(), 'dfe-bench-nemesis-'));
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
  const args = [CLI, 'verify-coordination', '--runners', String(RUNNERS), '--seconds', String(SECONDS), '--lease', String(LEASE_SECONDS), '--nemesis', FAULTS, '--seed', String(seed), '--json'];
  const child = spawn(process.execPath, args, {
    env: {
      ...env,
      LOG_LEVEL: 'warn',
      UV_THREADPOOL_SIZE: '16',
      DFE_CLICKHOUSE_BACKEND: 'embedded',
      DFE_EMBEDDED_PATH: dataDir,
      DFE_EMBEDDED_CONFIG_FILE: join(ROOT, 'examples/embedded-keeper.xml'),
      DFE_COORDINATION_CLAIMS: claims,
      DFE_HUNT_RUNNER_SETTLE_MS: '300',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => child.kill('SIGTERM'), 420_000);
  return new Promise((done, fail) => {
    child.once('exit', () => {
      clearTimeout(timer);
      rmSync(dataDir, { recursive: true, force: true });
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined) return fail(new Error(`verify-coordination --nemesis (claims ${claims}) printed no report: ${stderr.slice(-1000)}`));
      done({ report: JSON.parse(line) as VerifyReport, seed });
    });
  });
}

function figures(claims: string, { report: r, seed }: Ran): BenchLine[] {
  const c = r.coverage;
  const doubles = c.doubled + c.overlaps;
  const capacity = r.runners * r.cap;
  const bound = r.pollSeconds * Math.ceil(r.hunts / capacity) + r.longestRunSeconds;
  const longestFault = Math.max(0, ...(r.nemesis?.faults ?? []).map((f) => f.durationSeconds));
  const faultBound = bound + r.leaseSeconds + longestFault;
  const faults = (r.nemesis?.faults ?? []).map((f) => `${f.kind}${f.target ? ` ${f.target}` : ''} +${f.atSeconds} s`).join(', ');
  const name = `nemesis, claims ${claims}: ${r.runners} runner processes, ${r.hunts} hunts every second, ${r.seconds} s, lease ${r.leaseSeconds} s, ${FAULTS} (seed ${seed})`;
  const p99 = r.lateness.p99 ?? Number.POSITIVE_INFINITY;
  const max = r.lateness.max ?? Number.POSITIVE_INFINITY;
  return [
    {
      kind: 'figure',
      name: `${name}: fires covered twice`,
      measured: `${c.doubled} fire(s) covered twice, ${c.overlaps} overlapping window pair(s), of ${c.owed} owed fires in ${r.runs.succeeded} runs; ${r.doubleRunRows} rerun(s) of a window after a takeover (output kept once); faults: ${faults}`,
      baseline: 'none: a safety property, the same at any load',
      goal: '0',
      outcome: goal(c.owed > 0 && doubles === 0),
      shortName: `nemesis, ${claims}, doubles`,
      headline: `${doubles} double(s) of ${c.owed} fires`,
    },
    {
      kind: 'figure',
      name: `${name}: missed fires`,
      measured: `${c.missed} missed of ${c.owed} owed`,
      baseline: 'none: a safety property, the same at any load',
      goal: '0',
      outcome: goal(c.owed > 0 && c.missed === 0),
      shortName: `nemesis, ${claims}, missed`,
      headline: `${c.missed} missed of ${c.owed}`,
    },
    {
      kind: 'figure',
      name: `${name}: lateness`,
      measured: `p50 ${r.lateness.p50?.toFixed(2) ?? 'n/a'} s, p99 ${p99.toFixed(2)} s, max ${max.toFixed(2)} s`,
      baseline:
        `bound poll × ceil(owed hunts / capacity) + one run = ${r.pollSeconds} × ceil(${r.hunts} / ${capacity}) + ${r.longestRunSeconds.toFixed(2)} = ${bound.toFixed(2)} s; ` +
        `with faults + lease ${r.leaseSeconds} s + longest fault ${longestFault.toFixed(1)} s = ${faultBound.toFixed(2)} s`,
      goal: `p99 ≤ ${bound.toFixed(2)} s, max ≤ ${faultBound.toFixed(2)} s`,
      outcome: goal(p99 <= bound && max <= faultBound),
      shortName: `nemesis, ${claims}, lateness`,
      headline: `p99 ${p99.toFixed(1)} s, max ${max.toFixed(1)} s (bound ${bound.toFixed(1)} s / ${faultBound.toFixed(1)} s)`,
    },
  ];
}

export async function benchNemesis(): Promise<BenchLine[]> {
  const lines: BenchLine[] = [];
  for (const claims of ['keeper', 'tables'] as const) {
    const seed = Math.floor(Math.random() * 0xffffffff);
    lines.push(...figures(claims, await runNemesis(claims, seed)));
  }
  return lines;
}
