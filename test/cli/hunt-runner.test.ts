import { runNode, type ProcessResult } from '../helpers/run-process.js';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { freePort } from '../helpers/ports.js';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * `dfe-hunt-runner` through its process: the compiled CLI (`tsc -p
 * tsconfig.build.json`, then `node dist/src/cli/hunt-runner.js`) on an
 * embedded ClickHouse in a temp directory. Commands run one after another:
 * the embedded engine allows one process per data directory.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/src/cli/hunt-runner.js');
const dataDir = mkdtempSync(join(tmpdir(), 'dfe-cli-ch-'));
const hunts = tempHuntsDir();

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
  return { ...env, LOG_LEVEL: 'warn' };
}

type Result = ProcessResult;

function cli(...args: string[]): Promise<Result> {
  return runNode([CLI, ...args, '--embedded-path', dataDir, '--hunts', hunts.dir], childEnv());
}


beforeAll(() => {
  const build = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
  // tsc emits even when another file of the tree has a type error; the CLI must exist.
  if (build.status !== 0) console.warn(`tsc -p tsconfig.build.json exited ${build.status}:\n${build.stdout.slice(0, 2000)}`);
  expect(existsSync(CLI), 'the compiled CLI').toBe(true);
  hunts.write('hourly', 'schedule: {mode: rate, interval: 1h}\nqueries: ["SELECT count() FROM dfe.hunt_schedule"]\n');
  hunts.write('daily', 'schedule: {mode: rate, interval: "0 6 * * *"}\nqueries: ["SELECT {window_end:Int64}"]\n');
}, 180_000);
afterAll(() => {
  hunts.remove();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('dfe-hunt-runner CLI', () => {
  it('prints help and refuses bad input with exit 2', async () => {
    const help = await cli('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/run-now <hunt_id>/);
    const badFlag = await cli('due', '--poll', 'soon');
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/--poll="soon"/);
    const unknown = await cli('launch');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "launch"/);
  });

  it('schema: --print shows the DDL, --apply is idempotent', async () => {
    const printed = await cli('schema', '--print');
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/CREATE TABLE IF NOT EXISTS `dfe`\.`hunt_lease`.*ReplacingMergeTree\(claimed\)/);
    expect(printed.stdout).toMatch(/ALTER TABLE `dfe`\.`hunt_state` ADD COLUMN IF NOT EXISTS disabled_reason String DEFAULT ''/);
    // Keeper claims' table, last and commented out (`--apply` makes it only where KeeperMap works); left out when the table protocol is forced.
    expect(printed.stdout).toMatch(/-- Keeper claims: .*\n-- CREATE TABLE IF NOT EXISTS `dfe`\.`hunt_claim` .*ENGINE = KeeperMap\('\/dfe_coordination\/dfe\/hunt_claim', 100000\) PRIMARY KEY claim_key;\n$/);
    // The server-refreshed count (docs/tables.md#the-server-refreshed-count): its table always, no view while the setting is 0.
    expect(printed.stdout).toMatch(/CREATE TABLE IF NOT EXISTS `dfe`\.`hunt_backlog` .*ENGINE = MergeTree ORDER BY computed_at/);
    expect(printed.stdout).toContain('DROP VIEW IF EXISTS `dfe`.`hunt_backlog_refresh`');
    expect((await cli('schema', '--print', '--claims', 'tables')).stdout).not.toContain('hunt_claim');
    expect((await cli('schema')).stdout).toBe(printed.stdout);
    for (let i = 0; i < 2; i += 1) {
      const applied = await cli('schema', '--apply');
      expect(applied.code).toBe(0);
      expect(applied.stdout).toMatch(/schema applied to dfe \(single\): 14 statement\(s\)/);
    }
  });

  it('materialise writes once, then nothing; due --json lists the due hunts', async () => {
    const first = await cli('materialise');
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe('materialised 2 hunt(s) into dfe.hunt_schedule (2 added, 0 changed, 0 tombstoned)');
    const second = await cli('materialise');
    expect(second.stdout.trim()).toBe('materialised 2 hunt(s) into dfe.hunt_schedule (0 added, 0 changed, 0 tombstoned)');
    const due = await cli('due', '--json');
    expect(due.code).toBe(0);
    const rows = JSON.parse(due.stdout) as Array<{ hunt_id: string; fire: number; requested: boolean; server_now: number }>;
    expect(rows.map((r) => r.hunt_id).sort()).toEqual(['daily', 'hourly']);
    for (const r of rows) expect(r.server_now - r.fire).toBeGreaterThanOrEqual(0);
  });

  it('run serves probes and metrics, runs the due hunts, and stops on SIGTERM', async () => {
    const port = String(await freePort());
    const args = ['run', '--embedded-path', dataDir, '--hunts', hunts.dir, '--poll', '0.5', '--metrics-port', port, '--metrics-host', '127.0.0.1'];
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...childEnv(), LOG_LEVEL: 'info' } });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((done) => child.on('close', done));
    try {
      let url: string | undefined;
      let succeeded = 0;
      for (let i = 0; i < 200 && succeeded < 2; i += 1) {
        await new Promise((r) => setTimeout(r, 100));
        url ??= /"metrics":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out)?.[1];
        if (!url) continue;
        const metrics = await (await fetch(`${url}/metrics`)).text();
        succeeded = [...metrics.matchAll(/^dfe_hunt_runs_total\{hunt_id="\w+",outcome="succeeded"\} 1$/gm)].length;
      }
      expect(url, 'the runner logged its metrics URL').toBeDefined();
      expect(succeeded).toBe(2);
      expect((await fetch(`${url}/livez`)).status).toBe(200);
      const ready = await fetch(`${url}/readyz`);
      expect([ready.status, await ready.text()]).toEqual([200, 'ready: 2 hunt(s), claims tables\n']);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect((await cli('due', '--json')).stdout.trim()).toBe('[]');
  });

  it('run-now requests a run that the backlog counts; an unknown hunt is refused', async () => {
    const requested = await cli('run-now', 'hourly');
    expect(requested.code).toBe(0);
    const fire = Number(/at fire (\d+)/.exec(requested.stdout)?.[1]);
    expect(fire).toBeGreaterThan(0);
    const due = JSON.parse((await cli('due', '--json')).stdout) as Array<{ hunt_id: string; fire: number; requested: boolean }>;
    expect(due.map(({ hunt_id, fire: f, requested: r }) => ({ hunt_id, fire: f, requested: r }))).toEqual([
      { hunt_id: 'hourly', fire, requested: true },
    ]);
    const unknown = await cli('run-now', 'nope');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/hunt "nope" is not in dfe\.hunt_schedule/);
  });
});
