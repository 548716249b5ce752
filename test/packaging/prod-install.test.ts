/**
 * The container image's runtime steps, replayed outside Docker (no Docker engine here):
 * the Dockerfile's runtime stage is parsed and its COPYs, its `npm install` and its ENV are
 * applied to a temp root, with the build stage's output made by the same tsc build. Then
 * both programs start from that install through the same PATH wrappers the image uses.
 *
 * Not replayed (and why): `apt-get install tini` (needs the Debian image; tini's signal
 * forwarding is its own job) and `USER 1000` (the test runs as whoever runs it).
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../helpers/tools.js';
import { parseRuntimeStage } from './dockerfile.js';
import { freePort } from '../helpers/ports.js';
import { otlpReceiver } from '../telemetry/otlp-receiver.js';

const stage = parseRuntimeStage(join(REPO, 'Dockerfile'));
const CLIS = {
  'dfe-keda-shim': join(REPO, 'src', 'cli', 'shim.ts'),
  'dfe-hunt-runner': join(REPO, 'src', 'cli', 'hunt-runner.ts'),
} as const;
type Cli = keyof typeof CLIS;

const REFUSED_CLICKHOUSE = 'http://127.0.0.1:9';
let scratch = '';
let filesBefore: string[] = [];
/** The image's filesystem root, in a temp dir. */
const root = (path: string) => join(scratch, 'root', path);

function sh(command: string, args: string[], cwd: string, timeoutMs: number) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: timeoutMs, env: { ...process.env, npm_config_update_notifier: 'false' } });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

function replay(buildRoot: string): void {
  for (const step of stage.steps) {
    if (step.kind === 'copy') {
      const destination = root(step.destination);
      const into = step.destination.endsWith('/') || step.sources.length > 1;
      for (const source of step.sources) {
        // `COPY --from=build /src/...` takes the build stage's output; others the build context.
        const from = step.fromStage ? join(buildRoot, source.replace(/^\/src\/?/, '')) : join(REPO, source);
        const to = into ? join(destination, basename(source)) : destination;
        mkdirSync(dirname(to), { recursive: true });
        cpSync(from, to, { recursive: true });
      }
      continue;
    }
    const command = step.command;
    if (command.startsWith('apt-get')) continue; // tini: see the header
    if (command.startsWith('npm install')) {
      // The install itself, not `npm cache clean --force` (that would wipe the shared cache).
      const install = command.split('&&')[0]!.trim().split(/\s+/);
      sh('npm', install.slice(1), root(stage.workdir), 240_000);
      continue;
    }
    if (command.startsWith('find node_modules ')) {
      // The prune of files Node never loads, as written (its quoting is the shell's).
      sh('sh', ['-c', command], root(stage.workdir), 60_000);
      continue;
    }
    if (command.startsWith('chmod ')) {
      const [, mode, ...paths] = command.split(/\s+/);
      sh('chmod', [mode!, ...paths.map((p) => root(p))], scratch, 10_000);
      continue;
    }
    throw new Error(`Dockerfile runtime step not replayed by this test: RUN ${command}`);
  }
}

/** The image's ENV, its absolute paths moved under the temp root, plus node on PATH. */
function imageEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(stage.env)) env[key] = value.startsWith('/') ? root(value) : value;
  mkdirSync(env.HOME ?? root('/tmp'), { recursive: true });
  env.PATH = [root('/usr/local/bin'), dirname(process.execPath), '/usr/bin', '/bin'].join(':');
  return env;
}

function start(cli: Cli, args: string[], extraEnv: Record<string, string> = {}) {
  const result = spawnSync(root(`/usr/local/bin/${cli}`), args, {
    encoding: 'utf8',
    timeout: 20_000,
    // Loopback and unusual ports, should a program get as far as listening.
    env: { ...imageEnv(), DFE_KEDA_SHIM_HOST: '127.0.0.1', DFE_KEDA_SHIM_PORT: '18098', DFE_HUNT_RUNNER_METRICS_PORT: '18097', ...extraEnv },
    cwd: root(stage.workdir),
  });
  return { status: result.status, signal: result.signal, output: `${result.stdout}${result.stderr}` };
}

describe('production install (the Dockerfile runtime stage, replayed)', () => {
  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), 'dfe-prod-install-'));
    const buildRoot = join(scratch, 'build');
    // The build stage's `npm run build` is `tsc -p tsconfig.build.json`; the same, into the scratch dir.
    sh(process.execPath, [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json', '--outDir', join(buildRoot, 'dist')], REPO, 180_000);
    replay(buildRoot);
    filesBefore = filesOutsideTmp();
  }, 420_000);
  afterAll(() => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('runs on a supported Node LTS slim image as uid 1000 behind an init', () => {
    expect(stage.baseImage).toMatch(/^node:(22|24)-(\w+-)?slim$/);
    expect(stage.user).toBe('1000:1000');
    expect(stage.entrypoint).toEqual(['/usr/bin/tini', '--']);
    expect(stage.env.DFE_CLICKHOUSE_BACKEND).toBe('server');
    expect(stage.env.HOME).toBe('/tmp');
  });

  it('installs production dependencies only: no chdb, no dev tools', () => {
    const modules = root(join(stage.workdir, 'node_modules'));
    for (const runtime of ['@clickhouse/client', 'fastify', 'zod', 'yaml', 'pino', 'prom-client']) {
      expect(existsSync(join(modules, runtime)), runtime).toBe(true);
    }
    for (const dev of ['chdb', 'vitest', 'typescript', 'autocannon', 'fast-check', 'undici']) {
      expect(existsSync(join(modules, dev)), dev).toBe(false);
    }
  });

  it('prunes the files Node never loads (maps, type declarations, TypeScript sources, markdown) and keeps the licences', () => {
    const modules = root(join(stage.workdir, 'node_modules'));
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : []));
    const all = files(modules);
    expect(all.filter((f) => /\.(map|ts|mts|cts|md)$/.test(f) && !/\/(licen[cs]e|notice)[^/]*$/i.test(f))).toEqual([]);
    for (const licence of ['fastify/LICENSE', '@opentelemetry/api/LICENSE', 'zod/LICENSE']) expect(existsSync(join(modules, licence)), licence).toBe(true);
  });

  it('puts both programs on PATH as executables', () => {
    for (const cli of Object.keys(CLIS)) {
      const wrapper = root(`/usr/local/bin/${cli}`);
      expect(statSync(wrapper).mode & 0o111, cli).not.toBe(0);
    }
  });

  for (const cli of Object.keys(CLIS) as Cli[]) {
    it(`${cli} --help exits 0 from the production install`, () => {
      const run = start(cli, ['--help']);
      expect(run.signal).toBeNull();
      expect(run.status, run.output).toBe(0);
      expect(run.output).toMatch(new RegExp(`Usage: ${cli}`));
    });

    it(`${cli} run with DFE_CLICKHOUSE_BACKEND=server and no URL stops with a clear message`, () => {
      const run = start(cli, ['run']);
      expect(run.signal, 'it must exit by itself, not wait for a ClickHouse').toBeNull();
      expect(run.status).not.toBe(0);
      expect(run.output).toMatch(/DFE_CLICKHOUSE_URL/);
    });
  }

  it('without the server setting, the missing embedded engine is a startup error, not a silent database', () => {
    const run = start('dfe-keda-shim', ['run'], { DFE_CLICKHOUSE_BACKEND: 'auto', DFE_EMBEDDED_PATH: root('/tmp/ch') });
    expect(run.signal, 'it must exit by itself').toBeNull();
    expect(run.status).not.toBe(0);
    expect(run.output).toMatch(/chdb|embedded/i);
  });

  // A ClickHouse URL on a refused loopback port: the programs must come up and serve anyway
  // (readiness never depends on ClickHouse), which also proves the install holds every
  // runtime dependency and the built-in catalogue. Then SIGTERM ends them with exit 0.

  it('the shim serves from the production install with ClickHouse down, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const child = spawnServer('dfe-keda-shim', ['run', '--host', '127.0.0.1', '--port', String(port)]);
    try {
      await untilOk(`http://127.0.0.1:${port}/readyz`, child);
      const answer = await fetch(`http://127.0.0.1:${port}/keda/hunt-backlog`);
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ value: 0, source: 'cold_hold' });
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = await once(child, 'exit');
    expect(code, child.output()).toBe(0);
  });

  it('the runner stays up with ClickHouse down, probes answer, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const child = spawnServer('dfe-hunt-runner', ['run', '--metrics-host', '127.0.0.1', '--metrics-port', String(port), '--poll', '1'], {
      DFE_HUNTS_DIR: root(join(stage.workdir, 'examples', 'hunts')),
    });
    try {
      await untilOk(`http://127.0.0.1:${port}/livez`, child);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = await once(child, 'exit');
    expect(code, child.output()).toBe(0);
  });

  it('with an OTLP endpoint, the shim traces a poll from the production install and flushes it on SIGTERM', async () => {
    const receiver = await otlpReceiver();
    const port = await freePort();
    const child = spawnServer('dfe-keda-shim', ['run', '--host', '127.0.0.1', '--port', String(port)], {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_TRACES_SAMPLER: 'always_on',
    });
    try {
      try {
        await untilOk(`http://127.0.0.1:${port}/readyz`, child);
        expect((await fetch(`http://127.0.0.1:${port}/keda/hunt-backlog`)).status).toBe(200);
      } finally {
        child.kill('SIGTERM');
      }
      const [code] = await once(child, 'exit');
      expect(code, child.output()).toBe(0);
      // Nothing waited for the exporter's 5 s batch delay: the stop flushed the span.
      expect(receiver.spans.map((s) => s.name)).toContain('GET /keda/hunt-backlog');
    } finally {
      await receiver.close();
    }
  });

  // Last: with a read-only root filesystem in the cluster, any write outside /tmp would fail.
  it('wrote nothing outside /tmp while the programs ran', () => {
    expect(filesOutsideTmp()).toEqual(filesBefore);
  });
});

function spawnServer(cli: Cli, args: string[], extraEnv: Record<string, string> = {}) {
  const child = spawn(root(`/usr/local/bin/${cli}`), args, {
    env: { ...imageEnv(), DFE_CLICKHOUSE_URL: REFUSED_CLICKHOUSE, LOG_LEVEL: 'warn', ...extraEnv },
    cwd: root(stage.workdir),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return Object.assign(child, { output: () => output.slice(-4000) });
}

/** Polls until the URL answers 200; fails early if the process exits. Bounded: 150 tries. */
async function untilOk(url: string, child: ReturnType<typeof spawnServer>): Promise<void> {
  for (let attempt = 0; attempt < 150; attempt++) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before ${url} answered:\n${child.output()}`);
    const status = await fetch(url).then((r) => r.status, () => 0);
    if (status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} never answered 200:\n${child.output()}`);
}

/** Every path under the image root except /tmp (the emptyDir), sorted. */
function filesOutsideTmp(): string[] {
  const top = root('/');
  return (readdirSync(top, { recursive: true }) as string[]).filter((path) => path !== 'tmp' && !path.startsWith('tmp/')).sort();
}
