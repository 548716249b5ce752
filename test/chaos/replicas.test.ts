import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, expect, it, vi } from 'vitest';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { freePort } from '../helpers/ports.js';
import { needs } from '../helpers/requirement.js';

/**
 * Two REAL shim processes (the compiled CLI) over a REAL clickhouse-server that
 * is then killed (SIGKILL): a replica that (re)starts during the outage answers
 * what its peer answers — from its disk snapshot, or by asking the peer — and
 * not cold_hold (docs/failsafe.md#snapshot-and-peers). Asserts answers, not timings.
 */
const server = clickHouseServerAvailability();
if (server.kind === 'missing') {
  if (process.env.CI === 'true') throw new Error(`replica tests need clickhouse-server under CI: ${server.reason}`);
  console.warn(`[skip] replica tests: ${server.reason}`);
}

const entry = resolve(import.meta.dirname, '../..', 'dist', 'src', 'cli', 'shim.js');
const dir = mkdtempSync(join(tmpdir(), 'dfe-replicas-'));
const children: ChildProcess[] = [];
let ch: ClickHouseServerProcess | undefined;

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await ch?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

// 18.16 has no query parameters: a param-less query, one key. cold_hold 3 is never the seeded count.
const OVERRIDE = `queries:
  jobs:
    database: default
    sql: "SELECT count() AS value FROM default.jobs"
    deadline_ms: 1500
    timeout_seconds: 2
    cold_hold: 3
`;

interface Replica {
  readonly url: string;
  readonly child: ChildProcess;
  logs(): string;
}

interface ReplicaOptions {
  readonly port?: number;
  readonly snapshotDir?: string;
  readonly peers?: readonly number[];
}

async function startReplica(chUrl: string, options: ReplicaOptions): Promise<Replica> {
  const port = options.port ?? (await freePort());
  const override = join(dir, 'override.yaml');
  if (!existsSync(override)) writeFileSync(override, OVERRIDE);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DFE_')) env[k] = v;
  Object.assign(env, {
    LOG_LEVEL: 'info',
    DFE_CLICKHOUSE_URL: chUrl,
    DFE_KEDA_SHIM_HOST: '127.0.0.1',
    DFE_KEDA_SHIM_PORT: String(port),
    DFE_KEDA_SHIM_QUERY_CONFIG: override,
    DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS: '100',
    ...(options.snapshotDir === undefined ? {} : { DFE_KEDA_SHIM_SNAPSHOT_DIR: options.snapshotDir }),
    // Self is in the list, as with a headless Service: it must be left out.
    ...(options.peers === undefined ? {} : { DFE_KEDA_SHIM_PEERS: [port, ...options.peers].map((p) => `http://127.0.0.1:${p}`).join(',') }),
    DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '1000',
  });
  const child = spawn(process.execPath, [entry, 'run'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let logs = '';
  child.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  await vi.waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`replica exited ${child.exitCode}: ${logs}`);
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
    },
    { timeout: 30_000, interval: 100 },
  );
  return { url, child, logs: () => logs };
}

async function stop(replica: Replica, signal: NodeJS.Signals): Promise<void> {
  const exited = new Promise((done) => replica.child.once('exit', done));
  replica.child.kill(signal);
  await exited;
}

async function jobs(replica: Replica): Promise<{ value: number; source: string; age_seconds: number }> {
  const res = await fetch(`${replica.url}/q/jobs`);
  expect(res.status).toBe(200);
  return (await res.json()) as { value: number; source: string; age_seconds: number };
}

async function seed(url: string, rows: number): Promise<void> {
  const client = createClient({ url, log: { level: ClickHouseLogLevel.OFF } });
  try {
    await client.command({ query: 'CREATE TABLE IF NOT EXISTS default.jobs (n UInt32) ENGINE = MergeTree ORDER BY n' });
    await client.insert({ table: 'default.jobs', values: Array.from({ length: rows }, (_, n) => ({ n })), format: 'JSONEachRow' });
  } finally {
    await client.close();
  }
}

needs(server.kind === 'missing' ? server.reason : undefined).describe('two shim replicas and a killed clickhouse-server', () => {
  it('a replica restarted during the outage agrees with its peer: from its snapshot, and from the peer', async () => {
    ch = await startClickHouseServer();
    await seed(ch.url, 5);
    const snapA = join(dir, 'snap-a');
    const snapB = join(dir, 'snap-b');
    mkdirSync(snapA);
    const portA = await freePort();
    const portB = await freePort();
    const a = await startReplica(ch.url, { port: portA, snapshotDir: snapA, peers: [portB] });
    const b = await startReplica(ch.url, { port: portB, snapshotDir: snapB, peers: [portA] });
    expect(await jobs(a)).toEqual({ value: 5, source: 'fresh', age_seconds: 0 });
    expect(await jobs(b)).toEqual({ value: 5, source: 'fresh', age_seconds: 0 });
    // The periodic write (every 100 ms here) has the key on disk before A is killed.
    const snapshotFile = join(snapA, 'last-good.json');
    await vi.waitFor(() => expect(existsSync(snapshotFile) && readFileSync(snapshotFile, 'utf8')).toContain('"jobs"'), { timeout: 10_000, interval: 50 });

    await ch.kill();
    // An OOM kill of A: no graceful close, only the periodic snapshot is left.
    await stop(a, 'SIGKILL');
    expect((await jobs(b)).source).toBe('last_good');

    // Snapshot path: A again, same snapshot directory, no peers to ask.
    const fromSnapshot = await startReplica(ch.url, { port: portA, snapshotDir: snapA });
    const restored = await jobs(fromSnapshot);
    const peer = await jobs(b);
    expect(restored).toMatchObject({ value: 5, source: 'last_good' });
    expect(peer).toMatchObject({ value: 5, source: 'last_good' });
    // Its original timestamp came back: the age kept counting across the restart.
    expect(restored.age_seconds).toBeGreaterThan(0);
    expect(fromSnapshot.logs()).toContain('last-good snapshot restored');
    await stop(fromSnapshot, 'SIGTERM');

    // Peer path: A with an empty snapshot directory asks B for the cold key.
    const fromPeer = await startReplica(ch.url, { port: portA, snapshotDir: join(dir, 'snap-empty'), peers: [portB] });
    const asked = await jobs(fromPeer);
    expect(asked).toMatchObject({ value: 5, source: 'last_good' });
    expect(asked.age_seconds).toBeGreaterThan(0);
    expect((await jobs(b)).value).toBe(5);
    const metrics = await (await fetch(`${fromPeer.url}/metrics`)).text();
    expect(metrics).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="found"\} 1/);
    // Learnt once, then held locally: the next poll does not ask again.
    expect(await jobs(fromPeer)).toMatchObject({ value: 5, source: 'last_good' });
    expect(await (await fetch(`${fromPeer.url}/metrics`)).text()).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="found"\} 1/);
    await stop(fromPeer, 'SIGTERM');

    // Control: neither snapshot nor peers — the cold answer the two paths prevent.
    const alone = await startReplica(ch.url, { port: portA });
    expect(await jobs(alone)).toEqual({ value: 3, source: 'cold_hold', age_seconds: 0 });
    await stop(alone, 'SIGTERM');
    await stop(b, 'SIGTERM');
  }, 120_000);
});
