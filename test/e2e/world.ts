import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.js';
import { REPO } from '../helpers/tools.js';
import type { ControlPlane, KubeObject } from './control-plane.js';

/**
 * What the e2e scenarios run besides the control plane: the ClickHouse the shim reads (the
 * embedded engine behind src/clickhouse/http-front.ts, reached through a fault front per shim so
 * one scenario's outage stays its own), the shim as a host process (the compiled CLI), a bare
 * endpoint (what a user without the shim points KEDA at), and the objects KEDA scales.
 */

export type FaultMode =
  /** Forward to the engine. */
  | 'up'
  /** The server gone: the port refuses connections. */
  | 'killed'
  /** Connections accepted, nothing ever answered. */
  | 'blackhole'
  /** 200 with an HTML page. */
  | 'garbage'
  /** 200, half a JSON body, then silence. */
  | 'stall';

export interface FaultFront {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  mode(): FaultMode;
  set(mode: FaultMode): Promise<void>;
  close(): Promise<void>;
}

/** An HTTP front to ClickHouse at `target` whose answer a test switches (real sockets, no fake of the engine). */
export async function faultFront(target: string): Promise<FaultFront> {
  const port = await freePort();
  const targetUrl = new URL(target);
  let mode: FaultMode = 'up';
  const sockets = new Set<Socket>();
  const handler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
    if (mode === 'blackhole') return;
    if (mode === 'garbage') {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><body>502 Bad Gateway (a proxy that answers 200)</body></html>');
      return;
    }
    if (mode === 'stall') {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"meta":[{"name":"value","type":"UInt64"}],"data":[[');
      return;
    }
    const url = new URL(req.url ?? '/', 'http://front');
    const inUrl = url.searchParams.get('query');
    const forward = (path: string, headers: import('node:http').IncomingHttpHeaders, body?: Buffer) => {
      const upstream = request({ host: targetUrl.hostname, port: targetUrl.port, path, method: req.method, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      if (body === undefined) req.pipe(upstream);
      else upstream.end(body);
    };
    if (inUrl === null) return forward(req.url ?? '/', req.headers);
    // An INSERT sends its statement in the URL and its rows as the body; the engine front takes
    // one statement from the body, so they travel as one: the statement, then its rows.
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      url.searchParams.delete('query');
      const body = Buffer.concat([Buffer.from(`${inUrl}\n`), ...chunks]);
      const headers = { ...req.headers, 'content-length': String(body.length) };
      delete headers['transfer-encoding'];
      delete headers['content-encoding'];
      forward(`${url.pathname}${url.search}`, headers, body);
    });
  };
  let server: Server | undefined;
  const listen = async () => {
    server = createServer(handler);
    server.keepAliveTimeout = 5_000;
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server!.once('error', reject);
      server!.listen(port, '127.0.0.1', () => resolve());
    });
  };
  const shut = async () => {
    if (!server) return;
    const closing = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => closing.close(() => resolve()));
  };
  await listen();
  return {
    url: `http://127.0.0.1:${port}`,
    mode: () => mode,
    async set(next) {
      if (next === mode) return;
      // Connections of the previous mode (a stalled body, a black hole) end with it.
      for (const socket of sockets) socket.destroy();
      if (next === 'killed') await shut();
      else if (!server) await listen();
      mode = next;
    },
    close: shut,
  };
}

export interface ShimProcess {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** 127.0.0.1:<grpc port>, KEDA's scalerAddress. */
  readonly scalerAddress: string;
  readonly overridePath: string;
  /**
   * SIGKILL (an OOM kill: only the periodic snapshot survives), then the same ports, snapshot and
   * peers again; `loseSnapshot`: a new pod on another node (no snapshot), `peers`: its replicas.
   */
  restart(options?: { readonly loseSnapshot?: boolean; readonly peers?: string }): Promise<void>;
  stop(): Promise<void>;
  logs(): string;
}

export interface ShimOptions {
  readonly clickhouseUrl: string;
  readonly database: string;
  /** Catalogue override YAML (DFE_KEDA_SHIM_QUERY_CONFIG), reloaded when changed. */
  readonly override?: string;
  /** The StreamIsActive check interval (default 1000 ms). */
  readonly grpcCheckMs?: number;
  /** DFE_BACKLOG_REFRESH_SECONDS: the shim's backlog reads the server-refreshed count (default 0, off). */
  readonly backlogRefreshSeconds?: number;
}

const SHIM_ENTRY = join(REPO, 'dist', 'src', 'cli', 'shim.js');

/** The real shim CLI as a host process, on free ports, with a snapshot directory of its own. */
export async function startShimProcess(options: ShimOptions): Promise<ShimProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-e2e-shim-'));
  const snapshotDir = join(dir, 'snapshot');
  mkdirSync(snapshotDir);
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, options.override ?? 'queries: {}\n');
  const [port, grpcPort] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
  Object.assign(env, {
    LOG_LEVEL: 'warn',
    DFE_CLICKHOUSE_URL: options.clickhouseUrl,
    DFE_CLICKHOUSE_DATA_DATABASE: options.database,
    DFE_KEDA_SHIM_OTEL_DATABASE: options.database,
    DFE_KEDA_SHIM_HOST: '127.0.0.1',
    DFE_KEDA_SHIM_PORT: String(port),
    DFE_KEDA_SHIM_GRPC_PORT: String(grpcPort),
    DFE_KEDA_SHIM_QUERY_CONFIG: overridePath,
    DFE_KEDA_SHIM_SNAPSHOT_DIR: snapshotDir,
    DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS: '500',
    ...(options.grpcCheckMs === undefined ? {} : { DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS: String(options.grpcCheckMs) }),
    ...(options.backlogRefreshSeconds === undefined ? {} : { DFE_BACKLOG_REFRESH_SECONDS: String(options.backlogRefreshSeconds) }),
  });
  const url = `http://127.0.0.1:${port}`;
  let logs = '';
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const start = async () => {
    const proc = spawn(process.execPath, [SHIM_ENTRY, 'run'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    exited = new Promise((done) => proc.once('exit', () => done()));
    proc.stdout?.on('data', (d: Buffer) => (logs = (logs + d.toString()).slice(-20_000)));
    proc.stderr?.on('data', (d: Buffer) => (logs = (logs + d.toString()).slice(-20_000)));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`shim exited ${proc.exitCode}: ${logs}`);
      try {
        if ((await fetch(`${url}/readyz`)).status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`shim not ready in 60 s: ${logs}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  };
  const kill = async (signal: NodeJS.Signals) => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  await start();
  return {
    url,
    scalerAddress: `127.0.0.1:${grpcPort}`,
    overridePath,
    async restart(options = {}) {
      await kill('SIGKILL');
      if (options.loseSnapshot) {
        rmSync(snapshotDir, { recursive: true, force: true });
        mkdirSync(snapshotDir);
      }
      if (options.peers !== undefined) env.DFE_KEDA_SHIM_PEERS = options.peers;
      await start();
    },
    async stop() {
      await kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    logs: () => logs,
  };
}

export interface BareEndpoint {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * What a user without the shim points KEDA's metrics-api trigger at: an endpoint that runs one
 * SQL query on ClickHouse (`clickhouseUrl`, the same fault front as the shim's) and answers
 * `{"value": n}`. `onFailure: 'error'` answers 500 when the query fails (the honest bare
 * endpoint); `'zero'` answers 0 when it cannot read a number (an exporter reading an empty or
 * unreadable result as 0).
 */
export async function bareEndpoint(clickhouseUrl: string, sql: string, onFailure: 'error' | 'zero'): Promise<BareEndpoint> {
  const server = createServer((req, res) => {
    req.resume();
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 2_000);
    void (async () => {
      let value: number | undefined;
      try {
        const answer = await fetch(`${clickhouseUrl}/`, { method: 'POST', body: `${sql}\nFORMAT JSONCompact`, signal: controller.signal });
        const text = await answer.text();
        if (answer.status === 200) {
          const parsed = JSON.parse(text) as { data?: unknown[][] };
          const cell = Number(parsed.data?.[0]?.[0]);
          if (Number.isFinite(cell)) value = cell;
        }
      } catch {
        // the query failed
      } finally {
        clearTimeout(timer);
      }
      if (value === undefined && onFailure === 'zero') value = 0;
      if (value === undefined) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"error":"query failed"}');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ value }));
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as import('node:net').AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// --- objects KEDA scales --------------------------------------------------------------------

/** A Deployment of one pause container: no kubelet runs it, the replica count is the point. */
export function deployment(namespace: string, name: string, replicas = 1): KubeObject {
  const labels = { 'app.kubernetes.io/name': name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'pause', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: '1m' } } }] } },
    },
  };
}

export interface ScaledObjectSpec {
  readonly min: number;
  readonly max: number;
  readonly triggers: readonly Record<string, unknown>[];
  readonly pollingInterval?: number;
  readonly cooldownPeriod?: number;
  readonly fallback?: Record<string, unknown>;
}

export function scaledObject(namespace: string, name: string, spec: ScaledObjectSpec): KubeObject {
  return {
    apiVersion: 'keda.sh/v1alpha1',
    kind: 'ScaledObject',
    metadata: { name, namespace },
    spec: {
      scaleTargetRef: { name },
      minReplicaCount: spec.min,
      maxReplicaCount: spec.max,
      pollingInterval: spec.pollingInterval ?? 2,
      cooldownPeriod: spec.cooldownPeriod ?? 5,
      ...(spec.fallback ? { fallback: spec.fallback } : {}),
      triggers: spec.triggers,
    },
  };
}

/** A metrics-api trigger on `url`. */
export function metricsApi(name: string, url: string, metricType: 'AverageValue' | 'Value', target: number): Record<string, unknown> {
  return { type: 'metrics-api', name, metricType, metadata: { url, valueLocation: 'value', targetValue: String(target) } };
}

// --- reading what the cluster did -----------------------------------------------------------

export async function replicas(cp: ControlPlane, namespace: string, name: string): Promise<number | undefined> {
  const res = await cp.api('GET', `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`);
  if (res.status !== 200) return undefined;
  return res.json<{ spec: { replicas?: number } }>().spec.replicas;
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** "Type=Status(Reason)" of the ScaledObject and its HPA, and the HPA's current metrics: what a failed wait prints. */
export async function diagnosis(cp: ControlPlane, namespace: string, name: string): Promise<string> {
  const so = await cp.api('GET', `/apis/keda.sh/v1alpha1/namespaces/${namespace}/scaledobjects/${name}`);
  const hpa = await cp.api('GET', `/apis/autoscaling/v2/namespaces/${namespace}/horizontalpodautoscalers/keda-hpa-${name}`);
  const conditions = (text: string) => {
    try {
      const status = (JSON.parse(text) as { status?: { conditions?: Condition[]; currentMetrics?: unknown } }).status;
      return `${(status?.conditions ?? []).map((c) => `${c.type}=${c.status}(${c.reason ?? ''}: ${c.message ?? ''})`).join('; ')} metrics=${JSON.stringify(status?.currentMetrics ?? null)}`;
    } catch {
      return text.slice(0, 300);
    }
  };
  return `ScaledObject ${namespace}/${name}: ${conditions(so.body)}\nHPA keda-hpa-${name}: ${conditions(hpa.body)}`;
}

/** Polls `spec.replicas` until it equals `expected`; resolves with the ms it took. A generous deadline, not a timing assertion. */
export async function waitForReplicas(cp: ControlPlane, namespace: string, name: string, expected: number, timeoutMs = 120_000): Promise<number> {
  const started = Date.now();
  let seen: number | undefined;
  for (;;) {
    seen = await replicas(cp, namespace, name);
    if (seen === expected) return Date.now() - started;
    if (Date.now() - started > timeoutMs) {
      throw new Error(`${namespace}/${name}: spec.replicas ${String(seen)}, expected ${expected} within ${timeoutMs} ms\n${await diagnosis(cp, namespace, name)}`);
    }
    await new Promise((done) => setTimeout(done, 250));
  }
}

/** Samples `spec.replicas` every second for `ms`: every value seen, in order, repeats collapsed. */
export async function watchReplicas(cp: ControlPlane, namespace: string, name: string, ms: number): Promise<(number | undefined)[]> {
  const seen: (number | undefined)[] = [];
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const now = await replicas(cp, namespace, name);
    if (seen.length === 0 || seen[seen.length - 1] !== now) seen.push(now);
    await new Promise((done) => setTimeout(done, 1_000));
  }
  return seen;
}

export async function waitForCondition(cp: ControlPlane, path: string, type: string, timeoutMs = 60_000): Promise<void> {
  const started = Date.now();
  let last = '';
  for (;;) {
    const res = await cp.api('GET', path);
    last = res.body;
    if (res.status === 200) {
      const conditions = res.json<{ status?: { conditions?: Condition[] } }>().status?.conditions ?? [];
      if (conditions.some((c) => c.type === type && c.status === 'True')) return;
    }
    if (Date.now() - started > timeoutMs) throw new Error(`${path}: condition ${type} not True within ${timeoutMs} ms: ${last.slice(0, 1500)}`);
    await new Promise((done) => setTimeout(done, 250));
  }
}
