import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../helpers/ports.js';

/**
 * The CLI through its process: the compiled entry in dist/, built once for the
 * whole run by test/global-setup.ts.
 */
const root = resolve(import.meta.dirname, '../..');
const entry = join(root, 'dist', 'src', 'cli', 'shim.js');
const dir = mkdtempSync(join(tmpdir(), 'dfe-shim-cli-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DFE_')) env[k] = v;
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function start(args: string[], env: NodeJS.ProcessEnv = cleanEnv()): { child: ChildProcess; exit: Promise<Exit> } {
  const child = spawn(process.execPath, [entry, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<Exit>((done) => child.on('exit', (code) => done({ code, stdout, stderr })));
  return { child, exit };
}

const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('startup errors: one line naming the key or file', () => {
  it('a bad port flag exits 2 naming --port; the env twin names the variable', async () => {
    const [flag, env] = await Promise.all([
      start(['--port', 'tcp://10.0.0.1:8080']).exit,
      start(['run'], cleanEnv({ DFE_KEDA_SHIM_PORT: 'tcp://10.0.0.1:8080' })).exit,
    ]);
    expect(flag.code).toBe(2);
    expect(flag.stderr.trim().split('\n')).toHaveLength(1);
    expect(flag.stderr).toContain('--port');
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('DFE_KEDA_SHIM_PORT');
  });

  it('an invalid ClickHouse URL is named, but its credentials are not echoed', async () => {
    const [flag, env] = await Promise.all([
      start(['--clickhouse-url', 'https://keda:s3cret-pw@ch.example:99999']).exit,
      start(['run'], cleanEnv({ DFE_CLICKHOUSE_URL: 'https://keda:s3cret@pw@ch example:8443' })).exit,
    ]);
    expect([flag.code, env.code]).toEqual([2, 2]);
    expect(flag.stderr).toContain('--clickhouse-url="https://[redacted]@ch.example:99999"');
    expect(env.stderr).toContain('DFE_CLICKHOUSE_URL="https://[redacted]@ch example:8443"');
    expect(flag.stderr + env.stderr).not.toMatch(/s3cret|keda:/);
  });

  it('a count that is not a whole number exits 2 naming the variable (0.5 keys would be no cache bound at all)', async () => {
    const bad = await start(['run'], cleanEnv({ DFE_KEDA_SHIM_CACHE_MAX_KEYS: '0.5' })).exit;
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('invalid DFE_KEDA_SHIM_CACHE_MAX_KEYS="0.5": must be a whole number');
  });

  it('an unknown option or command exits 2; --help exits 0', async () => {
    const [nope, serve, help] = await Promise.all([start(['--nope']).exit, start(['serve']).exit, start(['--help']).exit]);
    expect(nope.code).toBe(2);
    expect(serve.code).toBe(2);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: dfe-keda-shim');
  });

  it('an invalid catalogue or override, or a missing override, exits non-zero naming the file (and the query and key)', async () => {
    const bad = file('bad.yaml', 'queries:\n  q:\n    sql: "SELECT 1"\n    bogus_key: 1\n');
    const good = file('good.yaml', 'queries:\n  q:\n    sql: "SELECT 1"\n');
    const badOverride = file('bad-override.yaml', 'queries:\n  q:\n    deadline_ms: 9000\n');
    const missing = join(dir, 'nowhere.yaml');
    const [invalid, override, absent] = await Promise.all([
      start(['--queries', bad]).exit,
      start(['--queries', good, '--override', badOverride]).exit,
      start(['--queries', good, '--override', missing]).exit,
    ]);
    expect(invalid.code).not.toBe(0);
    expect(invalid.stderr.trim().split('\n')).toHaveLength(1);
    expect(invalid.stderr).toContain(`${bad}: query "q" key "bogus_key"`);
    expect(override.code).not.toBe(0);
    expect(override.stderr).toContain(`${badOverride}: query "q" key "deadline_ms": 9000 must be less than timeout_seconds`);
    expect(absent.code).not.toBe(0);
    expect(absent.stderr).toContain(missing);
  });
});

describe('run', () => {
  it('serves, reloads on a change, survives SIGHUP (a reload, not an exit), finishes in-flight answers and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const queries = file('queries.yaml', 'queries:\n  answer:\n    sql: "SELECT 42 AS v"\n  slow:\n    sql: "SELECT sleep(0.5) + 1"\n');
    const override = file('override.yaml', 'queries: {}\n');
    const base = `http://127.0.0.1:${port}`;
    const { child, exit } = start([
      'run',
      '--host', '127.0.0.1',
      '--port', String(port),
      '--queries', queries,
      '--override', override,
      '--embedded-path', join(dir, 'ch'),
    ], cleanEnv({ LOG_LEVEL: 'info' }));
    let logs = '';
    child.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
    await vi.waitFor(async () => expect((await fetch(`${base}/readyz`)).status).toBe(200), { timeout: 30_000, interval: 100 });
    expect(await (await fetch(`${base}/q/answer`)).json()).toEqual({ value: 42, source: 'fresh', age_seconds: 0 });
    expect((await fetch(`${base}/q/extra`)).status).toBe(404);
    file('override.yaml', 'queries:\n  extra:\n    sql: "SELECT 7"\n');
    // The store's directory watch (or interval) picks the change up; SIGHUP asks for the same reload.
    await vi.waitFor(async () => expect((await fetch(`${base}/q/extra`)).status).toBe(200), { timeout: 10_000, interval: 100 });
    expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/dfe_keda_shim_catalogue_reloads_total\{result="applied"\} 1/);
    // An invalid override is rejected, counted and logged; the previous catalogue keeps serving.
    file('override.yaml', 'queries:\n  extra:\n    sql: "SELECT 7"\n    clamp_min: 5\n    clamp_max: 1\n');
    await vi.waitFor(async () => expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/catalogue_reloads_total\{result="rejected"\} 1/), {
      timeout: 10_000,
      interval: 100,
    });
    expect(logs).toContain('catalogue reload rejected');
    expect(await (await fetch(`${base}/q/extra`)).json()).toMatchObject({ value: 7, source: 'fresh' });
    child.kill('SIGHUP');
    await vi.waitFor(() => expect(logs).toContain('SIGHUP: reloading the catalogue'), { timeout: 10_000, interval: 50 });
    expect((await fetch(`${base}/q/answer`)).status).toBe(200);
    // SIGTERM while an answer is in flight: it is finished, then the process exits 0.
    const inflight = fetch(`${base}/q/slow`).then(async (r) => ({ status: r.status, body: await r.json() }));
    await vi.waitFor(async () => expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/dfe_keda_shim_inflight_queries 1/), {
      timeout: 10_000,
      interval: 20,
    });
    child.kill('SIGTERM');
    expect(await inflight).toEqual({ status: 200, body: { value: 1, source: 'fresh', age_seconds: 0 } });
    const done = await exit;
    if (done.code !== 0) console.log(logs, done.stderr);
    expect(done.code).toBe(0);
  });
});
