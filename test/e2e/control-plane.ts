import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.js';
import { REPO, tools } from '../helpers/tools.js';

/**
 * A real Kubernetes control plane and KEDA as plain processes on loopback, for the e2e lane:
 * etcd, kube-apiserver, kube-controller-manager (deployment, replicaset, HPA, serviceaccount
 * and garbage-collector controllers; no scheduler, no kubelet, no container runs: the
 * Deployment's `spec.replicas` is what the HPA sets), KEDA's operator and its metrics
 * apiserver. Binaries from .ci/install-control-plane.sh (.tools/control-plane/current/bin, or
 * DFE_CONTROL_PLANE_BIN). Every port is a free one; certificates are made here by openssl.
 *
 * The HPA reaches KEDA's metrics apiserver through the aggregation layer: APIService
 * v1beta1.external.metrics.k8s.io → Service keda/keda-metrics-apiserver of type ExternalName
 * (`localhost`), so the aggregator dials https://localhost:<adapter port> and never leaves
 * loopback (an Endpoints object may not name a loopback IP).
 *
 * A stand-in for the kubelet marks pods Running and Ready (see `standInKubelet`).
 *
 * Each daemon runs in its own session (detached), its output in <dir>/<name>.log; `stop()`
 * sends SIGTERM in reverse start order and waits for every PID to exit (SIGKILL after 10 s).
 */
export const CONTROL_PLANE_BIN = process.env.DFE_CONTROL_PLANE_BIN ?? join(REPO, '.tools', 'control-plane', 'current', 'bin');
const KEDA_CRDS = join(CONTROL_PLANE_BIN, '..', 'keda-crds');
const BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kubectl', 'keda-operator', 'keda-adapter'] as const;
type Binary = (typeof BINARIES)[number];
const INSTALL_HINT = 'run `bash .ci/install-control-plane.sh` (builds Kubernetes, etcd and KEDA from the Go module proxy, 25–50 min cold on 2 cores)';

/** Why the control plane cannot start here (what is missing, how to get it), or undefined. */
export function controlPlaneMissing(): string | undefined {
  const absent: string[] = BINARIES.filter((name) => !existsSync(join(CONTROL_PLANE_BIN, name)));
  if (!existsSync(KEDA_CRDS)) absent.push('keda-crds');
  if (!tools.openssl) absent.push('openssl');
  if (absent.length === 0) return undefined;
  return `missing ${absent.join(', ')} in ${CONTROL_PLANE_BIN}: ${INSTALL_HINT}`;
}

export const bin = (name: Binary): string => join(CONTROL_PLANE_BIN, name);

export interface ControlPlaneOptions {
  /** The HPA controller's sync period (the default 15 s is too slow for a test). */
  readonly hpaSyncSeconds?: number;
}

/**
 * What the kubelet would do for the HPA's arithmetic, and nothing more: every pod is marked
 * Running and Ready, and a pod being deleted is removed. The HPA's `Value` arithmetic
 * (`ceil(ready pods × value / target)`) counts Running and Ready pods, so without this a
 * `Value` trigger would always want zero; `AverageValue` does not need it. No container runs.
 */
async function standInKubelet(api: (method: string, path: string, body?: string, contentType?: string) => Promise<ApiResponse>): Promise<void> {
  const res = await api('GET', '/api/v1/pods');
  if (res.status !== 200) return;
  const pods = res.json<{ items: { metadata: { name: string; namespace: string; deletionTimestamp?: string }; status?: { phase?: string } }[] }>().items;
  for (const pod of pods) {
    const path = `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`;
    if (pod.metadata.deletionTimestamp) {
      await api('DELETE', `${path}?gracePeriodSeconds=0`);
    } else if (pod.status?.phase !== 'Running') {
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const status = {
        phase: 'Running',
        startTime: now,
        conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({ type, status: 'True', lastTransitionTime: now })),
      };
      await api('PATCH', `${path}/status`, JSON.stringify({ status }), 'application/merge-patch+json');
    }
  }
}

export interface ApiResponse {
  readonly status: number;
  readonly body: string;
  json<T = unknown>(): T;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

export interface ControlPlane {
  readonly dir: string;
  /** https://127.0.0.1:<port> */
  readonly server: string;
  /** An admin (system:masters) kubeconfig. */
  readonly kubeconfig: string;
  readonly hpaSyncSeconds: number;
  /** Milliseconds from the first spawn to the external metrics API answering. */
  readonly startMs: number;
  /** The apiserver's REST API as the admin. */
  api(method: string, path: string, body?: string, contentType?: string): Promise<ApiResponse>;
  /** Server-side apply of one object (force, field manager `dfe-e2e`). */
  apply(object: KubeObject): Promise<void>;
  /** kubectl with this kubeconfig; throws with its output when it exits non-zero. */
  kubectl(args: readonly string[], input?: string): string;
  /** Summed RSS of the daemons, in bytes, read from /proc. */
  rssBytes(): number;
  /** The daemons' PIDs by name. */
  pids(): Record<string, number | undefined>;
  /** The last `chars` of a daemon's log. */
  log(name: string, chars?: number): string;
  stop(): Promise<void>;
}

const API_GROUPS: Record<string, { prefix: string; plural: string; namespaced: boolean }> = {
  Namespace: { prefix: '/api/v1', plural: 'namespaces', namespaced: false },
  Service: { prefix: '/api/v1', plural: 'services', namespaced: true },
  ConfigMap: { prefix: '/api/v1', plural: 'configmaps', namespaced: true },
  Deployment: { prefix: '/apis/apps/v1', plural: 'deployments', namespaced: true },
  ScaledObject: { prefix: '/apis/keda.sh/v1alpha1', plural: 'scaledobjects', namespaced: true },
  APIService: { prefix: '/apis/apiregistration.k8s.io/v1', plural: 'apiservices', namespaced: false },
};

/** The REST path of an object (the kinds above). */
export function objectPath(kind: string, name: string, namespace?: string): string {
  const group = API_GROUPS[kind];
  if (!group) throw new Error(`objectPath: no REST path known for kind ${kind}`);
  const ns = group.namespaced ? `/namespaces/${namespace ?? 'default'}` : '';
  return `${group.prefix}${ns}/${group.plural}/${name}`;
}

interface Daemon {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** How it ended (exit code, signal or spawn error), while it runs undefined. */
  gone(): string | undefined;
}

/** Everything the helper started in this process, for the exit hook. */
const live = new Set<ChildProcess>();
let exitHook = false;
function installExitHook(): void {
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
}

function openssl(args: readonly string[]): void {
  const run = spawnSync(tools.openssl!, [...args], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${run.error?.message ?? run.stderr}`);
}

/** The certificates: a cluster CA (apiserver, admin), a front-proxy CA (aggregation), KEDA's CA (operator ↔ adapter, aggregator → adapter). */
function makeCerts(dir: string): void {
  const at = (name: string) => join(dir, name);
  const ca = (name: string) =>
    openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${name}`, '-keyout', at(`${name}.key`), '-out', at(`${name}.crt`)]);
  const signed = (name: string, caName: string, subject: string, extensions: string) => {
    writeFileSync(at(`${name}.cnf`), extensions);
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`)]);
    openssl(['x509', '-req', '-in', at(`${name}.csr`), '-CA', at(`${caName}.crt`), '-CAkey', at(`${caName}.key`), '-CAcreateserial', '-days', '1', '-extfile', at(`${name}.cnf`), '-out', at(`${name}.crt`)]);
  };
  ca('cluster-ca');
  signed('apiserver', 'cluster-ca', '/CN=kube-apiserver', 'subjectAltName=IP:127.0.0.1,IP:127.100.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n');
  signed('admin', 'cluster-ca', '/O=system:masters/CN=dfe-e2e-admin', 'extendedKeyUsage=clientAuth\n');
  ca('front-proxy-ca');
  signed('front-proxy-client', 'front-proxy-ca', '/CN=front-proxy-client', 'extendedKeyUsage=clientAuth\n');
  openssl(['genrsa', '-out', at('sa.key'), '2048']);
  openssl(['rsa', '-in', at('sa.key'), '-pubout', '-out', at('sa.pub')]);
  ca('keda-ca');
  signed(
    'keda',
    'keda-ca',
    '/CN=keda-metrics-apiserver.keda.svc',
    'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:keda-metrics-apiserver.keda.svc,DNS:keda-operator.keda.svc,DNS:keda-operator.keda.svc.cluster.local\nextendedKeyUsage=serverAuth,clientAuth\n',
  );
  // KEDA reads ca.crt, tls.crt and tls.key from one directory.
  mkdirSync(at('keda'));
  writeFileSync(join(dir, 'keda', 'ca.crt'), readFileSync(at('keda-ca.crt')));
  writeFileSync(join(dir, 'keda', 'tls.crt'), readFileSync(at('keda.crt')));
  writeFileSync(join(dir, 'keda', 'tls.key'), readFileSync(at('keda.key')));
}

function kubeconfigYaml(dir: string, server: string): string {
  return `apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster:
      server: ${server}
      certificate-authority: ${join(dir, 'cluster-ca.crt')}
users:
  - name: admin
    user:
      client-certificate: ${join(dir, 'admin.crt')}
      client-key: ${join(dir, 'admin.key')}
contexts:
  - name: e2e
    context: {cluster: e2e, user: admin}
current-context: e2e
`;
}

/** The environment of a daemon: this one's without variables a daemon would read as its own flags. */
function daemonEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('ETCD_') || key.startsWith('KUBE') || key.startsWith('DFE_') || key === 'POD_NAMESPACE' || key === 'WATCH_NAMESPACE') continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Polls `check` until it returns true; throws with `what` and `diagnose()` after `timeoutMs`, or at once when `gone()` says the daemon exited. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, diagnose: () => string, gone: () => string | undefined = () => undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    const exit = gone();
    if (exit !== undefined) throw new Error(`control plane: ${what} ${exit}\n${diagnose()}`);
    if (Date.now() > deadline) throw new Error(`control plane: ${what} not ready after ${timeoutMs} ms\n${diagnose()}`);
    await sleep(200);
  }
}

function rssOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Starts the whole control plane; on any failure stops what did start and throws with the logs. */
export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  installExitHook();
  const hpaSyncSeconds = options.hpaSyncSeconds ?? 2;
  const dir = mkdtempSync(join(tmpdir(), 'dfe-e2e-k8s-'));
  const at = (name: string) => join(dir, name);
  const daemons: Daemon[] = [];
  const started = Date.now();

  const logTail = (name: string, chars = 3000): string => {
    try {
      const text = readFileSync(at(`${name}.log`), 'utf8');
      return text.slice(-chars);
    } catch {
      return '';
    }
  };
  const diagnose = (name: string) => () => `--- ${name}.log (tail) ---\n${logTail(name)}`;

  const startDaemon = (name: string, binary: string, args: readonly string[], env: NodeJS.ProcessEnv = daemonEnv()): Daemon => {
    const out = openSync(at(`${name}.log`), 'a');
    // detached: a session of its own (setsid), so a signal to the test's group never reaches it half-way.
    const child = spawn(binary, [...args], { env, cwd: dir, detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    live.add(child);
    let ended: string | undefined;
    const exited = new Promise<void>((done) => {
      child.once('exit', (code, signal) => {
        ended = `exited (${code ?? signal})`;
        live.delete(child);
        done();
      });
      child.once('error', (err) => {
        ended = `could not start: ${err.message}`;
        live.delete(child);
        done();
      });
    });
    const daemon = { name, child, exited, gone: () => ended };
    daemons.push(daemon);
    return daemon;
  };

  const stop = async (): Promise<void> => {
    for (const daemon of [...daemons].reverse()) {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGTERM');
      const killer = setTimeout(() => daemon.child.kill('SIGKILL'), 10_000);
      await daemon.exited;
      clearTimeout(killer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    makeCerts(dir);
    const [etcdPort, etcdPeerPort, apiPort, kcmPort, kedaMetricsPort, kedaProbePort, kedaGrpcPort, adapterPort, adapterMetricsPort] = await Promise.all(
      Array.from({ length: 9 }, () => freePort()),
    );
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfig = at('admin.kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(dir, server));
    const ca = readFileSync(at('cluster-ca.crt'));
    const cert = readFileSync(at('admin.crt'));
    const key = readFileSync(at('admin.key'));

    const api = (method: string, path: string, body?: string, contentType = 'application/json'): Promise<ApiResponse> =>
      new Promise((resolve, reject) => {
        const req = httpsRequest(
          { host: '127.0.0.1', port: apiPort, path, method, ca, cert, key, servername: 'localhost', headers: body === undefined ? {} : { 'content-type': contentType }, timeout: 30_000 },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              resolve({ status: res.statusCode ?? 0, body: text, json: <T>() => JSON.parse(text) as T });
            });
            res.on('error', reject);
          },
        );
        req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
        req.on('error', reject);
        req.end(body);
      });

    const apply = async (object: KubeObject): Promise<void> => {
      const path = `${objectPath(object.kind, object.metadata.name, object.metadata.namespace)}?fieldManager=dfe-e2e&force=true`;
      const res = await api('PATCH', path, JSON.stringify(object), 'application/apply-patch+yaml');
      if (res.status >= 300) throw new Error(`apply ${object.kind} ${object.metadata.name}: HTTP ${res.status} ${res.body}`);
    };

    const kubectl = (args: readonly string[], input?: string): string => {
      const run = spawnSync(bin('kubectl'), ['--kubeconfig', kubeconfig, ...args], { input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
      if (run.status !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${run.status}): ${run.error?.message ?? ''}${run.stderr}${run.stdout}`);
      return run.stdout;
    };

    // --- etcd ------------------------------------------------------------------------------
    const etcd = startDaemon('etcd', bin('etcd'), [
      '--name', 'e2e',
      '--data-dir', at('etcd-data'),
      '--listen-client-urls', `http://127.0.0.1:${etcdPort}`,
      '--advertise-client-urls', `http://127.0.0.1:${etcdPort}`,
      '--listen-peer-urls', `http://127.0.0.1:${etcdPeerPort}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${etcdPeerPort}`,
      '--initial-cluster', `e2e=http://127.0.0.1:${etcdPeerPort}`,
      '--unsafe-no-fsync',
      '--log-level', 'warn',
    ]);
    await until('etcd', async () => (await healthGet(`http://127.0.0.1:${etcdPort}/health`)).includes('"true"'), 30_000, diagnose('etcd'), etcd.gone);

    // --- kube-apiserver --------------------------------------------------------------------
    const apiserver = startDaemon('kube-apiserver', bin('kube-apiserver'), [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      '--advertise-address=127.0.0.1',
      '--endpoint-reconciler-type=none',
      '--service-cluster-ip-range=127.100.0.0/16',
      `--cert-dir=${at('apiserver-certs')}`,
      `--tls-cert-file=${at('apiserver.crt')}`,
      `--tls-private-key-file=${at('apiserver.key')}`,
      `--client-ca-file=${at('cluster-ca.crt')}`,
      `--service-account-key-file=${at('sa.pub')}`,
      `--service-account-signing-key-file=${at('sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      '--authorization-mode=RBAC',
      `--requestheader-client-ca-file=${at('front-proxy-ca.crt')}`,
      '--requestheader-allowed-names=front-proxy-client',
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${at('front-proxy-client.crt')}`,
      `--proxy-client-key-file=${at('front-proxy-client.key')}`,
      '--enable-priority-and-fairness=false',
      '--v=0',
    ]);
    await until('kube-apiserver', async () => (await api('GET', '/readyz')).status === 200, 90_000, diagnose('kube-apiserver'), apiserver.gone);

    // --- kube-controller-manager -----------------------------------------------------------
    const kcm = startDaemon('kube-controller-manager', bin('kube-controller-manager'), [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      '--controllers=deployment-controller,replicaset-controller,horizontal-pod-autoscaler-controller,serviceaccount-controller,garbage-collector-controller',
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${kcmPort}`,
      `--cert-dir=${at('kcm-certs')}`,
      `--horizontal-pod-autoscaler-sync-period=${hpaSyncSeconds}s`,
      // The HPA's default scale-down stabilisation (5 min) would hide every scale-down in a test;
      // an HPA without its own `behavior` uses this instead.
      '--horizontal-pod-autoscaler-downscale-stabilization=0s',
      '--v=0',
    ]);
    await until('kube-controller-manager', async () => (await healthGet(`https://127.0.0.1:${kcmPort}/healthz`)) === 'ok', 60_000, diagnose('kube-controller-manager'), kcm.gone);

    // --- KEDA: CRDs, namespace, the aggregation path, operator, metrics apiserver ------------
    const crdFiles = readdirSync(KEDA_CRDS).filter((f) => f.endsWith('.yaml')).map((f) => join(KEDA_CRDS, f));
    kubectl(['apply', '--server-side', ...crdFiles.flatMap((f) => ['-f', f])]);
    kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
    await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'keda' } });
    await apply({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'keda-metrics-apiserver', namespace: 'keda' },
      spec: { type: 'ExternalName', externalName: 'localhost', ports: [{ name: 'https', port: adapterPort, targetPort: adapterPort }] },
    });
    await apply({
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: 'v1beta1.external.metrics.k8s.io' },
      spec: {
        service: { name: 'keda-metrics-apiserver', namespace: 'keda', port: adapterPort },
        group: 'external.metrics.k8s.io',
        version: 'v1beta1',
        caBundle: readFileSync(join(dir, 'keda', 'ca.crt')).toString('base64'),
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    });
    const kedaEnv = daemonEnv({ KUBECONFIG: kubeconfig, POD_NAMESPACE: 'keda', KEDA_CLUSTER_OBJECT_NAMESPACE: 'keda', WATCH_NAMESPACE: '' });
    const operator = startDaemon(
      'keda-operator',
      bin('keda-operator'),
      [
        '--leader-elect=false',
        '--enable-cert-rotation=false',
        `--cert-dir=${join(dir, 'keda')}`,
        `--metrics-bind-address=127.0.0.1:${kedaMetricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${kedaProbePort}`,
        `--metrics-service-bind-address=127.0.0.1:${kedaGrpcPort}`,
        '--zap-log-level=info',
        '--zap-encoder=console',
      ],
      kedaEnv,
    );
    await until('keda-operator', async () => (await healthGet(`http://127.0.0.1:${kedaProbePort}/readyz`)) === 'ok', 90_000, diagnose('keda-operator'), operator.gone);
    const adapter = startDaemon(
      'keda-adapter',
      bin('keda-adapter'),
      [
        `--secure-port=${adapterPort}`,
        '--bind-address=127.0.0.1',
        `--port=${adapterMetricsPort}`,
        `--cert-dir=${join(dir, 'keda')}`,
        `--tls-cert-file=${join(dir, 'keda', 'tls.crt')}`,
        `--tls-private-key-file=${join(dir, 'keda', 'tls.key')}`,
        `--metrics-service-address=127.0.0.1:${kedaGrpcPort}`,
        `--kubeconfig=${kubeconfig}`,
        `--lister-kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        '--zap-log-level=info',
      ],
      kedaEnv,
    );
    await until(
      'KEDA metrics apiserver (external.metrics.k8s.io through the aggregator)',
      async () => (await api('GET', '/apis/external.metrics.k8s.io/v1beta1')).status === 200,
      120_000,
      () => `${diagnose('keda-adapter')()}\n${diagnose('kube-apiserver')()}`,
      () => adapter.gone() ?? operator.gone(),
    );
    // Pods are admitted once the namespace's default ServiceAccount exists (serviceaccount controller).
    await until('the default ServiceAccount', async () => (await api('GET', '/api/v1/namespaces/default/serviceaccounts/default')).status === 200, 30_000, diagnose('kube-controller-manager'));
    const startMs = Date.now() - started;
    let kubeletRunning = true;
    const kubelet = (async () => {
      while (kubeletRunning) {
        await standInKubelet(api).catch(() => undefined);
        await sleep(1_000);
      }
    })();
    const stopAll = async () => {
      kubeletRunning = false;
      await kubelet;
      await stop();
    };

    return {
      dir,
      server,
      kubeconfig,
      hpaSyncSeconds,
      startMs,
      api,
      apply,
      kubectl,
      rssBytes: () => daemons.reduce((sum, d) => sum + rssOf(d.child.pid), 0),
      pids: () => Object.fromEntries(daemons.map((d) => [d.name, d.child.pid])),
      log: logTail,
      stop: stopAll,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * A GET of a component's health endpoint: plain HTTP, or HTTPS on the component's own
 * self-signed certificate (not the point here, so not verified).
 */
function healthGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: IncomingMessage) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve(text));
    };
    const req = url.startsWith('https:') ? httpsRequest(url, { rejectUnauthorized: false, timeout: 5_000 }, onResponse) : httpRequest(url, { timeout: 5_000 }, onResponse);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
