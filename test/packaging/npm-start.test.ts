/**
 * `npm start` as the README shows it: the whole system in one process on the embedded engine,
 * answering the README's curls, and stopped by a signal. Run through npm itself, because npm
 * runs the script under `sh -c`: a SIGTERM (a process supervisor, `kill <npm pid>`) reaches
 * only npm and its direct child, so the script must `exec` node — otherwise the shell dies and
 * the demo runs on as an orphan that keeps the ports and the embedded database's lock.
 *
 * `--ignore-scripts` skips the `prestart` build: test/global-setup.ts built dist/ already.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { REPO } from '../helpers/tools.js';
import { freePort } from '../helpers/ports.js';
import { scalerClient } from '../helpers/grpc-client.js';

const scratch = mkdtempSync(join(tmpdir(), 'dfe-npm-start-'));
let running: ChildProcess | undefined;

afterEach(() => {
  // Whatever happened, nothing of the demo outlives its test: npm was started as the leader
  // of its own process group, so the group holds npm, the shell and the demo.
  if (running?.pid !== undefined) {
    try {
      process.kill(-running.pid, 'SIGKILL');
    } catch {
      // the group is gone: everything exited
    }
  }
  running = undefined;
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The environment without DFE_* settings (a server URL there would send the demo to it). */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
  return { ...env, npm_config_update_notifier: 'false', ...extra };
}

/** The demo as `npm start` runs it, or (`direct`) its built entry with node; output collected. */
function spawnDemo(how: 'npm' | 'direct', env: Record<string, string>) {
  const [command, args]: [string, string[]] = how === 'npm' ? ['npm', ['start', '--ignore-scripts']] : [process.execPath, [join(REPO, 'dist', 'src', 'cli', 'demo.js')]];
  const child = spawn(command, args, { cwd: REPO, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv(env) });
  running = child;
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

/** Bounded: the banner comes once the schema, the demo tables, the runner and the shim are up. */
async function untilBanner(demo: ReturnType<typeof spawnDemo>): Promise<void> {
  for (let attempt = 0; attempt < 300 && !demo.output().includes('Ctrl-C stops it') && demo.child.exitCode === null; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  expect(demo.output(), 'the demo never printed its banner').toContain('Ctrl-C stops it');
}

async function startDemo(name: string) {
  const [shimPort, metricsPort, grpcPort] = [await freePort(), await freePort(), await freePort()];
  const demo = spawnDemo('npm', {
    DFE_EMBEDDED_PATH: join(scratch, name),
    DFE_KEDA_SHIM_PORT: String(shimPort),
    DFE_HUNT_RUNNER_METRICS_PORT: String(metricsPort),
    DFE_KEDA_SHIM_GRPC_PORT: String(grpcPort),
  });
  await untilBanner(demo);
  const shim = `http://127.0.0.1:${shimPort}`;
  return { child: demo.child, shim, runner: `http://127.0.0.1:${metricsPort}`, grpc: `127.0.0.1:${grpcPort}`, output: () => demo.output().slice(-3000) };
}

/** True while anything still answers at the URL; waits (bounded) for it to go away. */
async function stillAnswering(url: string): Promise<boolean> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const up = await fetch(url).then(
      () => true,
      () => false,
    );
    if (!up) return false;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return true;
}

describe('npm start (README "Two commands" and "Curl it")', () => {
  it('serves the README curls, and a SIGTERM to npm stops the demo too, exit 0', async () => {
    const demo = await startDemo('term');
    const backlog = await fetch(`${demo.shim}/keda/hunt-backlog`);
    expect(backlog.status).toBe(200);
    expect(await backlog.json()).toMatchObject({ source: 'fresh', value: expect.any(Number) });
    const pressure = await fetch(`${demo.shim}/keda/pressure?service=demo-ingest&hold=70`);
    expect(pressure.status).toBe(200);
    expect(await pressure.json()).toMatchObject({ source: 'fresh', value: expect.any(Number) });
    expect((await fetch(`${demo.shim}/readyz`)).status).toBe(200);
    const runnerMetrics = await (await fetch(`${demo.runner}/metrics`)).text();
    expect(runnerMetrics).toMatch(/^dfe_hunt_backlog /m);
    // The demo claims through Keeper (testkeeper in-process, examples/embedded-keeper.xml).
    expect(demo.output()).toContain('claims: keeper');
    expect(runnerMetrics).toMatch(/^dfe_hunt_runner_claim_mode\{mode="keeper"\} 1$/m);
    // KEDA's external scaler protocol on the demo's gRPC port, the same number as HTTP's.
    expect(demo.output()).toContain(`gRPC ${demo.grpc}`);
    const scaler = scalerClient(demo.grpc);
    try {
      const { metricValues } = await scaler.getMetrics({ query: 'backlog' }, 'backlog');
      expect(metricValues).toEqual([expect.objectContaining({ metricName: 'backlog', metricValueFloat: expect.any(Number) })]);
      expect(metricValues[0]!.metricValueFloat).toBeGreaterThanOrEqual(0);
    } finally {
      scaler.close();
    }

    demo.child.kill('SIGTERM');
    const [code] = await once(demo.child, 'exit');
    expect(await stillAnswering(`${demo.shim}/livez`), `the demo outlived npm:\n${demo.output()}`).toBe(false);
    expect(code, demo.output()).toBe(0);
  });

  it('the status line shows the backlog, the runs and the detections; the first detection within about a minute', async () => {
    const demo = await startDemo('status');
    // Bounded wait, not a timing assertion: the line comes every 10 s, and the seeded history
    // lets the first runs (at the first tick) find the attack bursts already.
    const line = /due hunts: \d+, runs: (\d+) succeeded, (\d+) failed, detections so far: (\d+)/g;
    let found: RegExpMatchArray | undefined;
    for (let attempt = 0; attempt < 90 && !found; attempt++) {
      found = [...demo.output().matchAll(line)].find((m) => Number(m[3]) > 0);
      if (!found) await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    expect(found, `no status line with a detection within ~90 s:\n${demo.output()}`).toBeDefined();
    expect(Number(found![1])).toBeGreaterThan(0);
    demo.child.kill('SIGTERM');
    await once(demo.child, 'exit');
  }, 120_000);

  it('Ctrl-C (SIGINT to the whole foreground group) stops it cleanly, exit 0', async () => {
    const demo = await startDemo('int');
    process.kill(-demo.child.pid!, 'SIGINT');
    const [code, signal] = await once(demo.child, 'exit');
    expect(await stillAnswering(`${demo.shim}/livez`), demo.output()).toBe(false);
    expect({ code, signal }, demo.output()).toEqual({ code: 0, signal: null });
    expect(demo.output()).not.toMatch(/second SIGINT/);
  });

  it('a shim port already taken: one line naming it and exit 1, not a crash of the embedded engine', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    try {
      const { port } = taken.address() as AddressInfo;
      const { child, output } = spawnDemo('direct', {
        DFE_EMBEDDED_PATH: join(scratch, 'taken'),
        DFE_KEDA_SHIM_PORT: String(port),
        DFE_HUNT_RUNNER_METRICS_PORT: String(await freePort()),
        DFE_KEDA_SHIM_GRPC_PORT: String(await freePort()),
      });
      const [code, signal] = await once(child, 'exit');
      expect({ code, signal }, output()).toEqual({ code: 1, signal: null });
      expect(output()).toMatch(new RegExp(`EADDRINUSE.*127\\.0\\.0\\.1:${port}`));
    } finally {
      taken.close();
    }
  });

  it('a gRPC port already taken: the demo starts anyway on a free gRPC port, says so, and serves KEDA there', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    try {
      const { port } = taken.address() as AddressInfo;
      const shimPort = await freePort();
      const demo = spawnDemo('direct', {
        DFE_EMBEDDED_PATH: join(scratch, 'grpc-taken'),
        DFE_KEDA_SHIM_PORT: String(shimPort),
        DFE_HUNT_RUNNER_METRICS_PORT: String(await freePort()),
        DFE_KEDA_SHIM_GRPC_PORT: String(port),
      });
      await untilBanner(demo);
      const output = demo.output();
      expect(output).toContain(`gRPC port ${port} is taken`);
      const address = /gRPC (127\.0\.0\.1:\d+): KEDA/.exec(output)?.[1];
      expect(address, output).toBeDefined();
      expect(address).not.toBe(`127.0.0.1:${port}`);
      const scaler = scalerClient(address!);
      try {
        expect((await scaler.getMetrics({ query: 'backlog' }, 'backlog')).metricValues).toHaveLength(1);
      } finally {
        scaler.close();
      }
      expect((await fetch(`http://127.0.0.1:${shimPort}/readyz`)).status).toBe(200);
      demo.child.kill('SIGTERM');
      const [code] = await once(demo.child, 'exit');
      expect(code, demo.output()).toBe(0);
    } finally {
      taken.close();
    }
  });
});
