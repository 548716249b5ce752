import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNode } from '../helpers/run-process.js';

/**
 * `dfe-hunt-runner verify-coordination` end to end, through the compiled CLI, on the
 * embedded engine with Keeper (examples/embedded-keeper.xml), in both claim modes:
 * exit 0 and a report of 0 doubles and 0 misses; bad input exits 2; the scratch
 * database is dropped unless --keep. One CLI process at a time (one process per
 * data directory). The nemesis' own runs are test/runner/race.test.ts's (the fleet lane);
 * here its flags and its clean-up under SIGTERM.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/src/cli/hunt-runner.js');
const dataDir = mkdtempSync(join(tmpdir(), 'dfe-verify-ch-'));

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) out[key] = value;
  return { ...out, LOG_LEVEL: 'warn', UV_THREADPOOL_SIZE: '16', DFE_CLICKHOUSE_BACKEND: 'embedded', ...extra };
}

const verify = (claims: string, ...args: string[]) =>
  runNode(
    [CLI, 'verify-coordination', ...args, '--embedded-path', dataDir, '--embedded-config', join(ROOT, 'examples/embedded-keeper.xml'), '--claims', claims],
    env({ DFE_HUNT_RUNNER_SETTLE_MS: '300' }),
    300_000,
  );

beforeAll(() => {
  const build = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
  if (build.status !== 0) console.warn(`tsc -p tsconfig.build.json exited ${build.status}:\n${build.stdout.slice(0, 2000)}`);
  expect(existsSync(CLI), 'the compiled CLI').toBe(true);
}, 180_000);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Live processes (not zombies) whose environment holds `mark`. */
function marked(mark: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').includes(mark)) continue;
      const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      if (state !== 'Z') found.push(`${pid} (${state})`);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

function reportOf(stdout: string) {
  const num = (re: RegExp) => Number(re.exec(stdout)?.[1] ?? Number.NaN);
  return {
    owed: num(/fires: (\d+) owed/),
    doubledOutput: num(/double runs: (\d+) fire\(s\) covered twice/),
    overlaps: num(/, (\d+) pair\(s\) of overlapping windows/),
    missed: num(/missed fires: (\d+)/),
    database: /database (dfe_verify_[0-9a-f]+)/.exec(stdout)?.[1],
  };
}

describe('dfe-hunt-runner verify-coordination', () => {
  it('refuses bad counts with exit 2, naming the flag', async () => {
    const bad = await verify('keeper', '--runners', '0', '--seconds', '5');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--runners must be a whole number ≥ 1, got "0"/);
    const nap = await verify('keeper', '--runners', '2', '--seconds', '5', '--nemesis', 'pause,nap');
    expect(nap.code).toBe(2);
    expect(nap.stderr).toMatch(/--nemesis: unknown fault "nap" in "pause,nap"; known: pause, cpu, stall, kill/);
    const seed = await verify('keeper', '--runners', '2', '--seconds', '5', '--seed', '3');
    expect(seed.code).toBe(2);
    expect(seed.stderr).toMatch(/--seed goes with --nemesis/);
    const log = await verify('tables', '--runners', '2', '--seconds', '5', '--lease-log');
    expect(log.code).toBe(2);
    expect(log.stderr).toMatch(/--lease-log goes with --keep/);
  });

  it('SIGTERM during a nemesis run leaves no process behind: stopped runners continued and killed, hogs killed', async () => {
    // Every child inherits this mark in its environment, so /proc finds any left behind.
    const mark = `nemesis-reap-${process.pid}-${Date.now()}`;
    const child = spawn(
      process.execPath,
      [CLI, 'verify-coordination', '--runners', '2', '--seconds', '60', '--lease', '2', '--nemesis', 'pause,cpu', '--seed', '1', '--embedded-path', dataDir, '--embedded-config', join(ROOT, 'examples/embedded-keeper.xml'), '--claims', 'keeper'],
      { env: env({ DFE_HUNT_RUNNER_SETTLE_MS: '300', DFE_TEST_MARK: mark }) },
    );
    let stderr = '';
    const both = new Promise<void>((resolve) => {
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
        // Both faults under way: a runner SIGSTOPped and the hogs spinning.
        if (/nemesis \+[\d.]+ s: pause/.test(stderr) && /nemesis \+[\d.]+ s: cpu/.test(stderr)) resolve();
      });
    });
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const timer = setTimeout(() => child.kill('SIGKILL'), 200_000);
    await Promise.race([both, exit]);
    expect(marked(mark).length, stderr).toBeGreaterThanOrEqual(3);
    child.kill('SIGTERM');
    const ended = await exit;
    clearTimeout(timer);
    // Exit 143; on the embedded engine chdb's own teardown at exit may end it by a signal instead.
    expect(ended.code === 143 || (ended.code === null && ended.signal !== null), `${JSON.stringify(ended)} ${stderr}`).toBe(true);
    expect(stderr).toMatch(/SIGTERM: killed [1-9]\d* child process\(es\)/);
    await new Promise((r) => setTimeout(r, 500));
    expect(marked(mark)).toEqual([]);
  }, 240_000);

  for (const claims of ['keeper', 'tables']) {
    it(`claims ${claims}: 3 runners, 15 s — exit 0, 0 doubles, 0 misses, the scratch database dropped`, async () => {
      const r = await verify(claims, '--runners', '3', '--seconds', '15');
      console.log(r.stdout);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`claims ${claims}`);
      expect(r.stdout).toMatch(/lateness \(fire → output written\): p50 [\d.]+ s, p99 [\d.]+ s, max [\d.]+ s/);
      expect(r.stdout).toMatch(/latest fires: [\w-]+@[+-]\d+ s run at [+-][\d.]+ s \([\d.]+ s\)/);
      expect(r.stdout).toContain('OK: every owed fire ran exactly once');
      const report = reportOf(r.stdout);
      expect(report.owed).toBeGreaterThan(20);
      expect({ doubledOutput: report.doubledOutput, overlaps: report.overlaps, missed: report.missed }).toEqual({ doubledOutput: 0, overlaps: 0, missed: 0 });
      expect(r.stdout).toContain('(dropped)');
    }, 320_000);
  }

  it('--keep --lease-log keeps every lease row the table protocol wrote: a claim and its release at least per run', async () => {
    const r = await verify('tables', '--runners', '2', '--seconds', '5', '--keep', '--lease-log');
    expect(r.code, r.stderr).toBe(0);
    const rows = Number(/lease log: (\d+) row\(s\) in dfe_verify_[0-9a-f]+\.verify_lease_log/.exec(r.stdout)?.[1]);
    const runs = Number(/runs: (\d+) succeeded/.exec(r.stdout)?.[1]);
    expect(runs).toBeGreaterThan(0);
    expect(rows).toBeGreaterThanOrEqual(2 * runs);
  }, 320_000);

  it('--keep keeps the scratch database', async () => {
    const r = await verify('keeper', '--runners', '2', '--seconds', '5', '--keep');
    expect(r.code, r.stderr).toBe(0);
    const { database } = reportOf(r.stdout);
    expect(r.stdout).toContain('(kept)');
    // Look with a fresh process: the database is still there.
    const listed = await runNode(
      [CLI, 'due', '--embedded-path', dataDir, '--embedded-config', join(ROOT, 'examples/embedded-keeper.xml')],
      env({ DFE_CLICKHOUSE_DATA_DATABASE: database ?? 'missing' }),
    );
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/\d+ hunt\(s\) due/);
  }, 320_000);
});
