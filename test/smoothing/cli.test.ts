import { runNode, type ProcessResult } from '../helpers/run-process.js';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * `dfe-hunt-runner smoothing …` and `enable` through the compiled process on an
 * embedded ClickHouse in a temp directory (one process at a time per directory).
 */
const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/src/cli/hunt-runner.js');
const dataDir = mkdtempSync(join(tmpdir(), 'dfe-smoothing-cli-'));
const hunts = tempHuntsDir();

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

type Result = ProcessResult;

function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  return runNode([CLI, ...args, '--embedded-path', dataDir, '--hunts', hunts.dir], childEnv(env));
}

beforeAll(async () => {
  const build = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
  if (build.status !== 0) console.warn(`tsc -p tsconfig.build.json exited ${build.status}:\n${build.stdout.slice(0, 2000)}`);
  expect(existsSync(CLI), 'the compiled CLI').toBe(true);
  hunts.write('cheap', 'schedule: {mode: rate, interval: 5m}\nqueries: ["SELECT 1"]\n');
  hunts.write('heavy', 'schedule: {mode: rate, interval: 15m}\nqueries: ["SELECT count() FROM numbers(10)"]\nceilings: {duration_ms: 60000}\n');
  hunts.write('pinned', 'schedule: {mode: rate, interval: 15m, phase_offset: 412}\nqueries: ["SELECT 2"]\n');
  expect((await cli(['schema', '--apply'])).code).toBe(0);
  const m = await cli(['materialise']);
  expect(m.stdout).toContain('materialised 3 hunt(s)');
}, 180_000);
afterAll(() => {
  hunts.remove();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('dfe-hunt-runner smoothing', () => {
  it('help names the verbs and flags', async () => {
    const help = await cli(['--help']);
    for (const word of ['smoothing plan', 'smoothing apply', 'smoothing status', 'smoothing export', 'enable <hunt_id>', '--weights', '--max-step']) {
      expect(help.stdout).toContain(word);
    }
  });

  it('status --json shows the offset sources and which cost source is used', async () => {
    const status = await cli(['smoothing', 'status', '--json']);
    expect(status.code, status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as { cost_source: string; smoothing: string; hunts: Array<Record<string, unknown>> };
    // The embedded engine keeps no system.query_log: costs come from hunt_run.
    expect(report.cost_source).toBe('hunt_run');
    expect(report.smoothing).toBe('observe');
    expect(report.hunts.map((h) => [h.hunt_id, h.offset_source, h.phase_offset])).toEqual([
      ['cheap', 'hash', expect.any(Number)],
      ['heavy', 'hash', expect.any(Number)],
      ['pinned', 'pinned', 412],
    ]);
  });

  it('status shows the ceilings of each hunt and whether the hunt file or the global setting sets them', async () => {
    const status = await cli(['smoothing', 'status', '--json'], { DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS: '5000', DFE_HUNT_AUTODISABLE_MAX_P95_MEMORY_BYTES: '1000000000' });
    expect(status.code, status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as { hunt_files_problem: string | null; hunts: Array<{ hunt_id: string; ceilings: unknown }> };
    expect(report.hunt_files_problem).toBeNull();
    const global = { memory_bytes: { value: 1_000_000_000, from: 'global' } };
    expect(report.hunts.map((h) => [h.hunt_id, h.ceilings])).toEqual([
      ['cheap', { ...global, duration_ms: { value: 5000, from: 'global' } }],
      ['heavy', { ...global, duration_ms: { value: 60000, from: 'hunt' } }],
      ['pinned', { ...global, duration_ms: { value: 5000, from: 'global' } }],
    ]);
    const text = await cli(['smoothing', 'status']);
    expect(text.stdout).toMatch(/^heavy\t.*\tdur 60000 ms \(hunt\)\tenabled$/m);
    expect(text.stdout).toMatch(/^cheap\t.*\t-\tenabled$/m);
  });

  it('status without --json draws the curve and names the cost source', async () => {
    const status = await cli(['smoothing', 'status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('costs from hunt_run');
    expect(status.stdout).toMatch(/^now +[▁▂▃▄▅▆▇█ ]+$/m);
  });

  it('plan --json prints the report and writes nothing', async () => {
    const before = await cli(['smoothing', 'status', '--json']);
    const plan = await cli(['smoothing', 'plan', '--json', '--cycles', '3', '--bucket-seconds', '60']);
    expect(plan.code, plan.stderr).toBe(0);
    const report = JSON.parse(plan.stdout) as Record<string, unknown>;
    expect(report).toMatchObject({ bucket_seconds: 60 });
    const after = await cli(['smoothing', 'status', '--json']);
    expect(JSON.parse(after.stdout).hunts).toEqual(JSON.parse(before.stdout).hunts);
  });

  it('plan without --json draws before and after', async () => {
    const plan = await cli(['smoothing', 'plan', '--cycles', '2']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(/^before +[▁▂▃▄▅▆▇█ ]+$/m);
    expect(plan.stdout).toMatch(/^after +[▁▂▃▄▅▆▇█ ]+$/m);
  });

  it('refuses bad flags with exit 2, naming flag and value', async () => {
    const cycles = await cli(['smoothing', 'plan', '--cycles', '0']);
    expect([cycles.code, cycles.stderr]).toEqual([2, expect.stringContaining('--cycles="0"')]);
    const weights = await cli(['smoothing', 'plan', '--weights', '0.3,0.3']);
    expect([weights.code, weights.stderr]).toEqual([2, expect.stringContaining('--weights="0.3,0.3"')]);
    const verb = await cli(['smoothing', 'shuffle']);
    expect(verb.code).toBe(2);
  });

  it('enable says when a hunt is not disabled', async () => {
    const enable = await cli(['enable', 'cheap']);
    expect(enable.code, enable.stderr).toBe(0);
    expect(enable.stdout).toContain('cheap is not disabled');
    expect((await cli(['enable'])).code).toBe(2);
  });
});
