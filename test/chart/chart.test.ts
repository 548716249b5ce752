/**
 * The Helm chart, rendered by the real helm over a values matrix, every object validated by
 * kubeconform -strict against the Kubernetes and KEDA schemas, and the fields that matter
 * asserted on the parsed output.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CHART, KUBE_VERSION, byKind, helmTemplate, kubeconform, missing, prepareSchemas, run, tools, type Manifest } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';

const CH = { clickhouse: { url: 'https://clickhouse.example:8443', existingSecret: 'ch-password' } };

/** The values matrix; each case is linted, rendered and validated. */
const MATRIX: Record<string, object> = {
  defaults: {},
  'admission caps': { ...CH, kedaShim: { admission: { maxInflight: 100, maxInflightPerQuery: 16, maxQueued: 5000 } } },
  'smoothing on, ceilings': {
    ...CH,
    huntRunner: {
      smoothing: { mode: 'on', cycleSeconds: 120, memoryCapBytes: 68719476736, cpuCores: 16, weights: '0.7,0.3' },
      autoDisable: { memCrashloop: 'off', maxP95DurationMs: 600000 },
    },
  },
  'autoscaling on, min 0, fallback': {
    ...CH,
    huntRunner: { autoscaling: { enabled: true, minReplicaCount: 0, maxReplicaCount: 7, targetBacklog: 4, cooldownPeriod: 120, pollingInterval: 15, fallback: { enabled: true } } },
  },
  'override catalogue + hunts': {
    ...CH,
    kedaShim: {
      queryOverride: {
        pressure: { timeout_seconds: 3 },
        errors_per_minute: { database: 'data', sql: 'SELECT count() FROM __DB__.errors', clamp_min: 0 },
      },
    },
    huntRunner: {
      hunts: {
        'brute-force-ssh': {
          schedule: { mode: 'rate', interval: '5m' },
          queries: ['INSERT INTO dfe.detections SELECT 1 WHERE {window}'],
          window_column: '_timestamp_load',
          settings: { max_memory_usage: 4000000000 },
        },
        'failed-logins.yaml': 'schedule: {mode: rate, interval: 90s}\nqueries:\n  - INSERT INTO dfe.detections SELECT 2 WHERE {window}\n',
      },
    },
  },
  'git-sync hunts': {
    ...CH,
    huntRunner: { gitSync: { enabled: true, repo: 'https://git.example/hunts.git', subPath: 'hunts/prod', existingSecret: 'git-creds' } },
  },
  'auth on (basic) with autoscaling': {
    ...CH,
    kedaShim: { auth: { enabled: true, mode: 'basic', existingSecret: 'shim-auth' } },
    huntRunner: { autoscaling: { enabled: true } },
  },
  'auth apiKey, network policy, separate users': {
    ...CH,
    kedaShim: {
      auth: { enabled: true, mode: 'apiKey', existingSecret: 'shim-auth' },
      networkPolicy: { enabled: true, scraper: { namespace: 'monitoring', podSelector: { 'app.kubernetes.io/name': 'prometheus' } } },
      clickhouse: { username: 'dfe_keda_shim', existingSecret: 'shim-ch' },
    },
    huntRunner: { clickhouse: { username: 'dfe_hunt_runner' }, autoscaling: { enabled: true } },
  },
  'runner only': { ...CH, kedaShim: { enabled: false } },
  'apiKey in a renamed query parameter': {
    ...CH,
    kedaShim: { auth: { enabled: true, mode: 'apiKey', existingSecret: 'shim-auth', apiKey: { method: 'query', header: 'X-Shim-Key', param: 'shim_key' } } },
    huntRunner: { autoscaling: { enabled: true } },
  },
  'shim mTLS (KEDA tls auth)': {
    ...CH,
    kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls', clientAuth: { enabled: true, caSecret: 'keda-client-ca', kedaSecret: 'keda-client' } } },
    huntRunner: { autoscaling: { enabled: true } },
  },
  'ClickHouse CA, shim TLS, extra volumes': {
    clickhouse: { ...CH.clickhouse, caCert: { existingSecret: 'ch-ca', key: 'root.pem' } },
    kedaShim: {
      tls: { enabled: true, existingSecret: 'shim-tls' },
      extraVolumes: [{ name: 'shim-extra', configMap: { name: 'shim-extra' } }],
      extraVolumeMounts: [{ name: 'shim-extra', mountPath: '/etc/shim-extra', readOnly: true }],
    },
    huntRunner: {
      autoscaling: { enabled: true },
      extraVolumes: [{ name: 'runner-extra', secret: { secretName: 'runner-extra' } }],
      extraVolumeMounts: [{ name: 'runner-extra', mountPath: '/etc/runner-extra', readOnly: true }],
    },
  },
};

const MONITORING_ON = {
  monitoring: {
    forceApi: true,
    monitor: { enabled: true, labels: { release: 'kube-prometheus-stack' }, metricRelabelings: [{ action: 'drop', regex: 'nodejs_gc_.*', sourceLabels: ['__name__'] }] },
    rules: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
    dashboard: { enabled: true },
  },
};
MATRIX['monitoring forced on, dashboard, extra manifests'] = {
  ...CH,
  ...MONITORING_ON,
  extraManifests: [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: '{{ .Release.Name }}-extra' }, data: { release: '{{ .Release.Name }}' } },
    'apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-extra-text\nstringData:\n  ns: {{ .Release.Namespace }}\n',
  ],
};
MATRIX['no snapshot, no peers, heap set'] = {
  ...CH,
  kedaShim: { heapMaxMiB: 96, lastGood: { snapshot: { enabled: false }, peers: { enabled: false } } },
};
MATRIX['PodMonitors, shim TLS'] = {
  ...CH,
  kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls' } },
  monitoring: { forceApi: true, monitor: { enabled: true, kind: 'PodMonitor', tlsConfig: { insecureSkipVerify: true } } },
};

const skip = missing('helm');
const skipValidation = skip ?? missing('kubeconform', 'openApiSpec', 'crdsDir');

const rendered = new Map<string, ReturnType<typeof helmTemplate>>();
const render = (name: string) => {
  let hit = rendered.get(name);
  if (!hit) {
    hit = helmTemplate(MATRIX[name]!);
    rendered.set(name, hit);
  }
  return hit;
};

const one = (manifests: Manifest[], kind: string, nameSuffix: string): Manifest => {
  const found = manifests.filter((m) => m.kind === kind && m.metadata.name.endsWith(nameSuffix));
  expect(found, `${kind} *${nameSuffix}`).toHaveLength(1);
  return found[0]!;
};
const podSpec = (m: Manifest) => m.spec.template.spec;
const container = (m: Manifest, name: string) => podSpec(m).containers.find((c: { name: string }) => c.name === name);
const envOf = (c: { env: { name: string; value?: string; valueFrom?: unknown }[] }) => Object.fromEntries(c.env.map((e) => [e.name, e.value ?? e.valueFrom]));

needs(skip).describe('helm chart', () => {
  it('passes helm lint for every values case', () => {
    for (const [name, values] of Object.entries(MATRIX)) {
      const result = run(tools.helm!, ['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '--values', '-'], JSON.stringify(values));
      expect(result.status, `${name}: ${result.stdout}${result.stderr}`).toBe(0);
    }
  });

  needs(skipValidation).describe('kubeconform', () => {
    let schemaLocation = '';
    beforeAll(() => {
      schemaLocation = prepareSchemas();
    });

    it.each(Object.keys(MATRIX))('validates every object of "%s" strictly', (name) => {
      const { yaml, manifests } = render(name);
      const result = kubeconform(schemaLocation, yaml);
      const bad = result.resources.filter((r) => r.status !== 'statusValid');
      expect(bad, result.raw).toEqual([]);
      expect(result.status, result.raw).toBe(0);
      // Every object was checked against a schema, none skipped for lack of one.
      expect(result.resources.map((r) => `${r.kind}/${r.name}`).sort()).toEqual(manifests.map((m) => `${m.kind}/${m.metadata.name}`).sort());
    });

    it('rejects what the schemas forbid (the check is not vacuous)', () => {
      const { manifests } = render('autoscaling on, min 0, fallback');
      const deployment = structuredClone(one(manifests, 'Deployment', '-shim'));
      deployment.spec.replica = 2; // typo of replicas
      const scaled = structuredClone(one(manifests, 'ScaledObject', '-hunt-runner'));
      scaled.spec.triggers[0].metadata.targetValue = 4; // KEDA wants strings in trigger metadata
      const job = structuredClone(one(manifests, 'Job', '-materialise'));
      job.spec.template.spec.containers[0].securityContext.readOnlyRootFs = true;
      const monitoring = render('monitoring forced on, dashboard, extra manifests').manifests;
      const monitor = structuredClone(one(monitoring, 'ServiceMonitor', '-shim'));
      monitor.spec.endpoint = monitor.spec.endpoints; // typo of endpoints
      const rule = structuredClone(byKind(monitoring, 'PrometheusRule')[0]!);
      rule.spec.groups[0].rules[0].for = 60; // a duration string, not a number
      const stream = [deployment, scaled, job, monitor, rule].map((m) => JSON.stringify(m)).join('\n---\n');
      const result = kubeconform(schemaLocation, stream);
      expect(result.status).not.toBe(0);
      expect(result.resources.filter((r) => r.status === 'statusInvalid').map((r) => r.kind).sort()).toEqual([
        'Deployment',
        'Job',
        'PrometheusRule',
        'ScaledObject',
        'ServiceMonitor',
      ]);
    });
  });

  it('defaults: one runner replica, no ScaledObject, the materialise hook Job', () => {
    const { manifests } = render('defaults');
    const runner = one(manifests, 'Deployment', '-hunt-runner');
    expect(runner.spec.replicas).toBe(1);
    expect(byKind(manifests, 'ScaledObject')).toEqual([]);
    const job = one(manifests, 'Job', '-materialise');
    expect(job.metadata.annotations).toMatchObject({
      'helm.sh/hook': 'post-install,post-upgrade',
      'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
    });
    expect(container(job, 'materialise').args).toEqual(['dfe-hunt-runner', 'materialise']);
    expect(podSpec(job).initContainers.map((c: { args: string[] }) => c.args)).toEqual([['dfe-hunt-runner', 'schema', '--apply']]);
    // The Job reads the same hunts as the runner.
    expect(envOf(container(job, 'materialise')).DFE_HUNTS_DIR).toBe(envOf(container(runner, 'hunt-runner')).DFE_HUNTS_DIR);
    expect(podSpec(job).volumes).toContainEqual(podSpec(runner).volumes.find((v: { name: string }) => v.name === 'hunts'));
    // Both apply the schema, so both set hunt_run's TTL from the one value (docs/tables.md).
    const schemaInit = podSpec(job).initContainers.find((c: { name: string }) => c.name === 'schema');
    expect(envOf(schemaInit).DFE_HUNT_RUN_RETENTION_DAYS).toBe('90');
    expect(envOf(container(runner, 'hunt-runner')).DFE_HUNT_RUN_RETENTION_DAYS).toBe('90');
    // Probes on the metrics port.
    const hr = container(runner, 'hunt-runner');
    expect(hr.ports).toEqual([{ name: 'metrics', containerPort: 9464, protocol: 'TCP' }]);
    expect(hr.livenessProbe.httpGet).toEqual({ path: '/livez', port: 'metrics' });
    expect(hr.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
  });

  it('backlog.refreshSeconds: one value in the shim, the runner and the schema Job (off by default; --set reaches all three)', () => {
    const refreshOf = (manifests: Manifest[]) => {
      const job = one(manifests, 'Job', '-materialise');
      return [
        container(one(manifests, 'Deployment', '-shim'), 'shim'),
        container(one(manifests, 'Deployment', '-hunt-runner'), 'hunt-runner'),
        podSpec(job).initContainers.find((c: { name: string }) => c.name === 'schema'),
      ].map((c) => envOf(c).DFE_BACKLOG_REFRESH_SECONDS);
    };
    expect(refreshOf(render('defaults').manifests)).toEqual(['0', '0', '0']);
    expect(refreshOf(helmTemplate(CH, CHART, ['--set', 'backlog.refreshSeconds=10']).manifests)).toEqual(['10', '10', '10']);
    expect(refreshOf(helmTemplate({ ...CH, backlog: { refreshSeconds: 3600 } }).manifests)).toEqual(['3600', '3600', '3600']);
  });

  it('smoothing: observe by default with auto-disable on; the values reach the runner env, null capacities left to the server', () => {
    const defaults = envOf(container(one(render('defaults').manifests, 'Deployment', '-hunt-runner'), 'hunt-runner'));
    expect(defaults).toMatchObject({ DFE_HUNT_SMOOTHING: 'observe', DFE_HUNT_AUTODISABLE_MEM_CRASHLOOP: '3/3600', DFE_HUNT_SMOOTHING_WEIGHTS: '0.5,0.5' });
    expect(defaults.DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES).toBeUndefined();
    expect(defaults.DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS).toBeUndefined();
    const on = envOf(container(one(render('smoothing on, ceilings').manifests, 'Deployment', '-hunt-runner'), 'hunt-runner'));
    expect(on.DFE_HUNT_SMOOTHING_ENABLED).toBeUndefined();
    expect(on).toMatchObject({
      DFE_HUNT_SMOOTHING: 'on',
      DFE_HUNT_SMOOTHING_CYCLE_SECONDS: '120',
      DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES: '68719476736',
      DFE_HUNT_SMOOTHING_CPU_CORES: '16',
      DFE_HUNT_SMOOTHING_WEIGHTS: '0.7,0.3',
      DFE_HUNT_AUTODISABLE_MEM_CRASHLOOP: 'off',
      DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS: '600000',
    });
    // Values written for the old boolean keep their meaning: rendered as the old variable, which the runner maps (false = off).
    const legacy = envOf(container(one(helmTemplate({ ...CH, huntRunner: { smoothing: { enabled: false } } }).manifests, 'Deployment', '-hunt-runner'), 'hunt-runner'));
    expect(legacy.DFE_HUNT_SMOOTHING_ENABLED).toBe('false');
    expect(legacy.DFE_HUNT_SMOOTHING).toBeUndefined();
  });

  it('shim replicas: 2 by default, a headless Service of them, an emptyDir snapshot and the peer URL in the env', () => {
    const { manifests } = render('defaults');
    const shim = one(manifests, 'Deployment', '-shim');
    expect(shim.spec.replicas).toBe(2);
    const peers = one(manifests, 'Service', '-shim-peers');
    expect(peers.spec.clusterIP).toBe('None');
    expect(peers.spec.selector).toEqual(shim.spec.selector.matchLabels);
    expect(peers.spec.ports).toEqual([{ name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' }]);
    expect(podSpec(shim).volumes).toContainEqual({ name: 'last-good', emptyDir: { sizeLimit: '16Mi' } });
    const c = container(shim, 'shim');
    expect(c.volumeMounts).toContainEqual({ name: 'last-good', mountPath: '/var/lib/dfe-keda-shim/last-good' });
    expect(envOf(c)).toMatchObject({
      DFE_KEDA_SHIM_SNAPSHOT_DIR: '/var/lib/dfe-keda-shim/last-good',
      DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS: '10000',
      DFE_KEDA_SHIM_PEERS: `http://${peers.metadata.name}.${peers.metadata.namespace ?? 'dfe'}.svc:8080`,
      DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '250',
    });
    // The image derives the heap from the memory limit unless a value is set.
    expect(envOf(c).DFE_NODE_HEAP_MAX_MIB).toBeUndefined();
    const tls = envOf(container(one(render('PodMonitors, shim TLS').manifests, 'Deployment', '-shim'), 'shim'));
    expect(tls.DFE_KEDA_SHIM_PEERS).toMatch(/^https:\/\//);

    const off = render('no snapshot, no peers, heap set').manifests;
    const offShim = one(off, 'Deployment', '-shim');
    expect(off.filter((m) => m.kind === 'Service' && m.metadata.name.endsWith('-shim-peers'))).toEqual([]);
    expect(podSpec(offShim).volumes.map((v: { name: string }) => v.name)).not.toContain('last-good');
    const offEnv = envOf(container(offShim, 'shim'));
    expect(offEnv.DFE_KEDA_SHIM_SNAPSHOT_DIR).toBeUndefined();
    expect(offEnv.DFE_KEDA_SHIM_PEERS).toBeUndefined();
    expect(offEnv.DFE_NODE_HEAP_MAX_MIB).toBe('96');
  });

  it('shim PDB: minAvailable 1 of 2 pods by default; none for a single pod, whose PDB would block every node drain', () => {
    expect(one(render('defaults').manifests, 'PodDisruptionBudget', '-shim').spec.minAvailable).toBe(1);
    expect(byKind(helmTemplate({ ...CH, kedaShim: { replicas: 1 } }).manifests, 'PodDisruptionBudget')).toEqual([]);
    expect(byKind(helmTemplate({ ...CH, kedaShim: { replicas: 3, pdb: { minAvailable: 3 } } }).manifests, 'PodDisruptionBudget')).toEqual([]);
    // A percentage is the operator's own call: rendered as given.
    const percent = helmTemplate({ ...CH, kedaShim: { replicas: 1, pdb: { minAvailable: '50%' } } }).manifests;
    expect(one(percent, 'PodDisruptionBudget', '-shim').spec.minAvailable).toBe('50%');
  });

  it('autoscaling on: no replicas field, a ScaledObject with the values given, 0 rendered as 0', () => {
    const { manifests } = render('autoscaling on, min 0, fallback');
    const runner = one(manifests, 'Deployment', '-hunt-runner');
    expect('replicas' in runner.spec).toBe(false);
    const scaled = one(manifests, 'ScaledObject', '-hunt-runner');
    expect(scaled.spec).toMatchObject({
      scaleTargetRef: { name: runner.metadata.name },
      minReplicaCount: 0,
      maxReplicaCount: 7,
      cooldownPeriod: 120,
      pollingInterval: 15,
      fallback: { failureThreshold: 3, replicas: 1, behavior: 'currentReplicas' },
    });
    expect(scaled.spec.triggers).toEqual([
      {
        type: 'metrics-api',
        name: 'hunt-backlog',
        metricType: 'AverageValue',
        metadata: { targetValue: '4', url: 'http://rel-dfe-keda-shim-shim.dfe.svc.cluster.local:8080/keda/hunt-backlog', valueLocation: 'value' },
      },
    ]);
    // The URL names the Service the chart renders.
    expect(byKind(manifests, 'Service').map((s) => s.metadata.name)).toContain('rel-dfe-keda-shim-shim');
  });

  it('override catalogue: a ConfigMap mounted as a directory where DFE_KEDA_SHIM_QUERY_CONFIG points, with a checksum', () => {
    const { manifests } = render('override catalogue + hunts');
    const configMap = one(manifests, 'ConfigMap', '-query-override');
    const catalogue = parse(configMap.data['queries.yaml']);
    expect(catalogue).toEqual({
      queries: {
        pressure: { timeout_seconds: 3 },
        errors_per_minute: { database: 'data', sql: 'SELECT count() FROM __DB__.errors', clamp_min: 0 },
      },
    });
    const shim = one(manifests, 'Deployment', '-shim');
    const configPath = envOf(container(shim, 'shim')).DFE_KEDA_SHIM_QUERY_CONFIG as string;
    const volume = podSpec(shim).volumes.find((v: { configMap?: { name: string } }) => v.configMap?.name === configMap.metadata.name);
    const mount = container(shim, 'shim').volumeMounts.find((m: { name: string }) => m.name === volume.name);
    expect(mount.subPath).toBeUndefined(); // subPath mounts never see ConfigMap updates
    expect(mount.readOnly).toBe(true);
    expect(configPath).toBe(`${mount.mountPath}/queries.yaml`);
    expect(shim.spec.template.metadata.annotations['checksum/query-override']).toMatch(/^[0-9a-f]{64}$/);
    // hotReload: no checksum on the pod template, so pods stay and the shim re-reads the file.
    const hot = helmTemplate({ ...CH, kedaShim: { queryOverrideReload: 'hotReload', queryOverride: { pressure: { timeout_seconds: 3 } } } }).manifests;
    expect(one(hot, 'Deployment', '-shim').spec.template.metadata.annotations?.['checksum/query-override']).toBeUndefined();
    expect(envOf(container(one(hot, 'Deployment', '-shim'), 'shim')).DFE_KEDA_SHIM_QUERY_CONFIG).toBe(configPath);
    // Another catalogue, another checksum: the Deployment rolls.
    const other = helmTemplate({ ...CH, kedaShim: { queryOverride: { pressure: { timeout_seconds: 4 } } } }).manifests;
    expect(one(other, 'Deployment', '-shim').spec.template.metadata.annotations['checksum/query-override']).not.toBe(
      shim.spec.template.metadata.annotations['checksum/query-override'],
    );
  });

  it('hunts ConfigMap: one <id>.yaml per hunt, objects rendered, YAML text kept as written, big integers intact', () => {
    const { manifests } = render('override catalogue + hunts');
    const hunts = one(manifests, 'ConfigMap', '-hunts');
    expect(Object.keys(hunts.data).sort()).toEqual(['brute-force-ssh.yaml', 'failed-logins.yaml']);
    expect(hunts.data['failed-logins.yaml']).toBe('schedule: {mode: rate, interval: 90s}\nqueries:\n  - INSERT INTO dfe.detections SELECT 2 WHERE {window}\n');
    expect(parse(hunts.data['brute-force-ssh.yaml'])).toEqual({
      schedule: { mode: 'rate', interval: '5m' },
      queries: ['INSERT INTO dfe.detections SELECT 1 WHERE {window}'],
      window_column: '_timestamp_load',
      settings: { max_memory_usage: 4000000000 },
    });
  });

  it('git-sync: init clone + sidecar in the runner, a one-time clone in the Job, both reading the same dir', () => {
    const { manifests } = render('git-sync hunts');
    expect(byKind(manifests, 'ConfigMap').filter((c) => c.metadata.name.endsWith('-hunts'))).toEqual([]);
    const runner = one(manifests, 'Deployment', '-hunt-runner');
    const job = one(manifests, 'Job', '-materialise');
    const gitEnv = (c: { env: { name: string; value: string }[] }) => Object.fromEntries(c.env.map((e) => [e.name, e.value]));
    const init = podSpec(runner).initContainers[0];
    const sidecar = container(runner, 'git-sync');
    expect(gitEnv(init)).toMatchObject({ GITSYNC_REPO: 'https://git.example/hunts.git', GITSYNC_ONE_TIME: 'true', GITSYNC_ROOT: '/git', GITSYNC_LINK: 'hunts' });
    expect(gitEnv(sidecar)).toMatchObject({ GITSYNC_ONE_TIME: 'false', GITSYNC_PERIOD: '60s' });
    expect(sidecar.envFrom).toEqual([{ secretRef: { name: 'git-creds' } }]);
    expect(gitEnv(podSpec(job).initContainers[0])).toMatchObject({ GITSYNC_ONE_TIME: 'true' });
    expect(envOf(container(runner, 'hunt-runner')).DFE_HUNTS_DIR).toBe('/git/hunts/hunts/prod');
    expect(envOf(container(job, 'materialise')).DFE_HUNTS_DIR).toBe('/git/hunts/hunts/prod');
  });

  it('admission: set caps become the env settings; unset ones are left to the backend default', () => {
    const set = envOf(container(one(render('admission caps').manifests, 'Deployment', '-shim'), 'shim'));
    expect(set).toMatchObject({ DFE_KEDA_SHIM_MAX_INFLIGHT: '100', DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY: '16', DFE_KEDA_SHIM_MAX_QUEUED: '5000' });
    const defaults = envOf(container(one(render('defaults').manifests, 'Deployment', '-shim'), 'shim'));
    expect(Object.keys(defaults).filter((k) => k.startsWith('DFE_KEDA_SHIM_MAX_IN') || k === 'DFE_KEDA_SHIM_MAX_QUEUED')).toEqual([]);
  });

  it('auth: the Secret mounted as files, the env pointing at them, a TriggerAuthentication on the trigger', () => {
    const { manifests } = render('auth on (basic) with autoscaling');
    const shim = one(manifests, 'Deployment', '-shim');
    const env = envOf(container(shim, 'shim'));
    expect(env).toMatchObject({
      DFE_KEDA_SHIM_AUTH_MODE: 'basic',
      DFE_KEDA_SHIM_AUTH_USERNAME_FILE: '/etc/dfe-keda-shim/auth/username',
      DFE_KEDA_SHIM_AUTH_PASSWORD_FILE: '/etc/dfe-keda-shim/auth/password',
    });
    expect(podSpec(shim).volumes).toContainEqual({ name: 'auth', secret: { secretName: 'shim-auth' } });
    expect(container(shim, 'shim').volumeMounts).toContainEqual({ name: 'auth', mountPath: '/etc/dfe-keda-shim/auth', readOnly: true });
    const auth = one(manifests, 'TriggerAuthentication', '-shim-auth');
    expect(auth.spec.secretTargetRef).toEqual([
      { parameter: 'username', name: 'shim-auth', key: 'username' },
      { parameter: 'password', name: 'shim-auth', key: 'password' },
    ]);
    const trigger = one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0];
    expect(trigger.metadata.authMode).toBe('basic');
    expect(trigger.authenticationRef).toEqual({ name: auth.metadata.name });

    const apiKey = render('auth apiKey, network policy, separate users').manifests;
    expect(envOf(container(one(apiKey, 'Deployment', '-shim'), 'shim')).DFE_KEDA_SHIM_AUTH_TOKEN_FILE).toBe('/etc/dfe-keda-shim/auth/token');
    expect(one(apiKey, 'TriggerAuthentication', '-shim-auth').spec.secretTargetRef).toEqual([{ parameter: 'apiKey', name: 'shim-auth', key: 'token' }]);
    expect(one(apiKey, 'ScaledObject', '-hunt-runner').spec.triggers[0].metadata).toMatchObject({ authMode: 'apiKey', method: 'header', keyParamName: 'X-API-KEY' });
  });

  it('apiKey names: the shim reads the header and parameter KEDA is told to send (issue 9 item 12)', () => {
    const { manifests } = render('apiKey in a renamed query parameter');
    expect(envOf(container(one(manifests, 'Deployment', '-shim'), 'shim'))).toMatchObject({
      DFE_KEDA_SHIM_AUTH_API_KEY_HEADER: 'X-Shim-Key',
      DFE_KEDA_SHIM_AUTH_API_KEY_PARAM: 'shim_key',
    });
    expect(one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0].metadata).toMatchObject({ authMode: 'apiKey', method: 'query', keyParamName: 'shim_key' });
  });

  it('mTLS: the client CA mounted and named, TCP probes, a TriggerAuthentication in KEDA tls mode (issue 9 item 13)', () => {
    const { manifests } = render('shim mTLS (KEDA tls auth)');
    const shim = one(manifests, 'Deployment', '-shim');
    const c = container(shim, 'shim');
    expect(envOf(c).DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE).toBe('/etc/dfe-keda-shim/client-ca/ca.crt');
    expect(podSpec(shim).volumes).toContainEqual({ name: 'client-ca', secret: { secretName: 'keda-client-ca' } });
    expect(c.volumeMounts).toContainEqual({ name: 'client-ca', mountPath: '/etc/dfe-keda-shim/client-ca', readOnly: true });
    expect([c.livenessProbe.tcpSocket, c.readinessProbe.tcpSocket, c.livenessProbe.httpGet]).toEqual([{ port: 'http' }, { port: 'http' }, undefined]);
    const auth = one(manifests, 'TriggerAuthentication', '-shim-auth');
    expect(auth.spec.secretTargetRef).toEqual([
      { parameter: 'cert', name: 'keda-client', key: 'tls.crt' },
      { parameter: 'key', name: 'keda-client', key: 'tls.key' },
      { parameter: 'ca', name: 'keda-client', key: 'ca.crt' },
    ]);
    const trigger = one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0];
    expect(trigger.metadata.authMode).toBe('tls');
    expect(trigger.metadata.url).toMatch(/^https:/);
    expect(trigger.authenticationRef).toEqual({ name: auth.metadata.name });
  });

  it('ClickHouse CA: the Secret mounted read-only in every container that talks to ClickHouse, DFE_CLICKHOUSE_CA_CERT naming the file', () => {
    const { manifests } = render('ClickHouse CA, shim TLS, extra volumes');
    const pods = [one(manifests, 'Deployment', '-shim'), one(manifests, 'Deployment', '-hunt-runner'), one(manifests, 'Job', '-materialise')];
    const clients = [
      container(pods[0]!, 'shim'),
      container(pods[1]!, 'hunt-runner'),
      container(pods[2]!, 'materialise'),
      podSpec(pods[2]!).initContainers.find((c: { name: string }) => c.name === 'schema'),
    ];
    for (const pod of pods) expect(podSpec(pod).volumes).toContainEqual({ name: 'clickhouse-ca', secret: { secretName: 'ch-ca' } });
    for (const c of clients) {
      expect(c.volumeMounts, c.name).toContainEqual({ name: 'clickhouse-ca', mountPath: '/etc/dfe/clickhouse-ca', readOnly: true });
      expect(envOf(c).DFE_CLICKHOUSE_CA_CERT, c.name).toBe('/etc/dfe/clickhouse-ca/root.pem');
    }
  });

  it('shim TLS: the tls Secret mounted, the TLS env set, HTTPS probes, an https ScaledObject URL', () => {
    const { manifests } = render('ClickHouse CA, shim TLS, extra volumes');
    const shim = one(manifests, 'Deployment', '-shim');
    const c = container(shim, 'shim');
    expect(podSpec(shim).volumes).toContainEqual({ name: 'tls', secret: { secretName: 'shim-tls' } });
    expect(c.volumeMounts).toContainEqual({ name: 'tls', mountPath: '/etc/dfe-keda-shim/tls', readOnly: true });
    expect(envOf(c)).toMatchObject({ DFE_KEDA_SHIM_TLS_CERT_FILE: '/etc/dfe-keda-shim/tls/tls.crt', DFE_KEDA_SHIM_TLS_KEY_FILE: '/etc/dfe-keda-shim/tls/tls.key' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/livez', port: 'http', scheme: 'HTTPS' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http', scheme: 'HTTPS' });
    const trigger = one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0];
    expect(trigger.metadata.url).toBe('https://rel-dfe-keda-shim-shim.dfe.svc.cluster.local:8080/keda/hunt-backlog');
    // A configured address is the operator's: used as given.
    const configured = helmTemplate({ ...CH, kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls' } }, huntRunner: { autoscaling: { enabled: true, shimAddress: 'https://shim.example:8443/' } } });
    expect(one(configured.manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0].metadata.url).toBe('https://shim.example:8443/keda/hunt-backlog');
  });

  it("extra volumes: the shim's in the shim pod, the runner's in the runner pod and the materialise Job", () => {
    const { manifests } = render('ClickHouse CA, shim TLS, extra volumes');
    const names = (list: { name: string }[]) => list.map((v) => v.name);
    const shim = one(manifests, 'Deployment', '-shim');
    expect(names(podSpec(shim).volumes)).toEqual(['tmp', 'last-good', 'tls', 'clickhouse-ca', 'shim-extra']);
    expect(container(shim, 'shim').volumeMounts).toContainEqual({ name: 'shim-extra', mountPath: '/etc/shim-extra', readOnly: true });
    const runnerMount = { name: 'runner-extra', mountPath: '/etc/runner-extra', readOnly: true };
    const runner = one(manifests, 'Deployment', '-hunt-runner');
    const job = one(manifests, 'Job', '-materialise');
    for (const pod of [runner, job]) {
      expect(podSpec(pod).volumes).toContainEqual({ name: 'runner-extra', secret: { secretName: 'runner-extra' } });
      expect(names(podSpec(pod).volumes)).not.toContain('shim-extra');
    }
    expect(container(runner, 'hunt-runner').volumeMounts).toContainEqual(runnerMount);
    expect(container(job, 'materialise').volumeMounts).toContainEqual(runnerMount);
    expect(podSpec(job).initContainers[0].volumeMounts).toContainEqual(runnerMount);
  });

  it('defaults: no CA, TLS or extra volumes, mounts or env; plain-http probes', () => {
    const { manifests } = render('defaults');
    const names = (list: { name: string }[] = []) => list.map((v) => v.name);
    const shim = one(manifests, 'Deployment', '-shim');
    const runner = one(manifests, 'Deployment', '-hunt-runner');
    const job = one(manifests, 'Job', '-materialise');
    expect(names(podSpec(shim).volumes)).toEqual(['tmp', 'last-good']);
    expect(names(podSpec(runner).volumes)).toEqual(['tmp', 'hunts']);
    expect(names(podSpec(job).volumes)).toEqual(['tmp', 'hunts']);
    const containers = [container(shim, 'shim'), container(runner, 'hunt-runner'), container(job, 'materialise'), ...podSpec(job).initContainers];
    for (const c of containers) {
      expect(names(c.volumeMounts), c.name).toEqual(c.name === 'schema' ? ['tmp'] : c.name === 'shim' ? ['tmp', 'last-good'] : ['tmp', 'hunts']);
      expect(Object.keys(envOf(c)).filter((k) => /CA_CERT|TLS/.test(k)), c.name).toEqual([]);
    }
    expect(container(shim, 'shim').livenessProbe.httpGet).toEqual({ path: '/livez', port: 'http' });
    expect(container(shim, 'shim').readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
  });

  it('separate ClickHouse users for the shim and the runner, passwords only from Secrets', () => {
    const { manifests } = render('auth apiKey, network policy, separate users');
    const shimEnv = envOf(container(one(manifests, 'Deployment', '-shim'), 'shim'));
    const runnerEnv = envOf(container(one(manifests, 'Deployment', '-hunt-runner'), 'hunt-runner'));
    expect(shimEnv.DFE_CLICKHOUSE_USERNAME).toBe('dfe_keda_shim');
    expect(shimEnv.DFE_CLICKHOUSE_PASSWORD).toEqual({ secretKeyRef: { name: 'shim-ch', key: 'password' } });
    expect(runnerEnv.DFE_CLICKHOUSE_USERNAME).toBe('dfe_hunt_runner');
    expect(runnerEnv.DFE_CLICKHOUSE_PASSWORD).toEqual({ secretKeyRef: { name: 'ch-password', key: 'password' } });
    for (const env of [shimEnv, runnerEnv]) {
      expect(env).toMatchObject({ DFE_CLICKHOUSE_BACKEND: 'server', DFE_CLICKHOUSE_URL: 'https://clickhouse.example:8443' });
    }
    expect(byKind(manifests, 'Secret')).toEqual([]);
  });

  it('network policy: only the KEDA namespace and the configured scraper reach the shim port', () => {
    const { manifests } = render('auth apiKey, network policy, separate users');
    const policy = one(manifests, 'NetworkPolicy', '-shim');
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.ingress).toEqual([
      {
        ports: [{ port: 'http', protocol: 'TCP' }],
        from: [
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'keda' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'keda-operator' } } },
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } },
          // The other shim pods (peer lookups of the last-good cache).
          { podSelector: { matchLabels: one(manifests, 'Deployment', '-shim').spec.selector.matchLabels } },
        ],
      },
    ]);
    expect(render('defaults').manifests.filter((m) => m.kind === 'NetworkPolicy')).toEqual([]);
  });

  it.each(Object.keys(MATRIX))('"%s": every pod non-root, read-only root, no service links', (name) => {
    const pods = render(name).manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job');
    expect(pods.length).toBeGreaterThan(0);
    for (const pod of pods) {
      const spec = podSpec(pod);
      expect(spec.enableServiceLinks, pod.metadata.name).toBe(false);
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } });
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        expect(c.securityContext, `${pod.metadata.name}/${c.name}`).toMatchObject({
          runAsNonRoot: true,
          runAsUser: 1000,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        });
        // The only writable path is the /tmp emptyDir.
        expect(c.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
      }
      expect(spec.volumes).toContainEqual({ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } });
    }
  });

  it('NOTES.txt tells the operator how to port-forward and curl the shim', () => {
    // `helm template` does not print NOTES.txt (install does, but needs a cluster): render a
    // copy of it through `tpl` in a scratch copy of the chart.
    const copy = mkdtempSync(join(tmpdir(), 'dfe-notes-'));
    try {
      cpSync(CHART, copy, { recursive: true });
      cpSync(join(CHART, 'templates', 'NOTES.txt'), join(copy, 'notes.txt'));
      writeFileSync(
        join(copy, 'templates', 'zz-notes.yaml'),
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n',
      );
      const notes = helmTemplate({ ...CH, kedaShim: { auth: { enabled: true, mode: 'bearer', existingSecret: 'shim-auth' } } }, copy).manifests.find(
        (m) => m.metadata.name === 'notes',
      )!.data.notes as string;
      expect(notes).toContain('kubectl -n dfe port-forward svc/rel-dfe-keda-shim-shim 8080:8080');
      expect(notes).toContain('curl -s http://127.0.0.1:8080/keda/hunt-backlog');
      expect(notes).toContain("curl -s 'http://127.0.0.1:8080/keda/pressure?service=<ServiceName>&hold=70'");
      expect(notes).toContain('Authorization: Bearer');
      expect(notes).toContain('kubectl -n dfe logs job/rel-dfe-keda-shim-materialise');
      // With listener TLS: https, and -k (the certificate names the Service, not 127.0.0.1).
      const tlsNotes = helmTemplate({ ...CH, kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls' } } }, copy).manifests.find(
        (m) => m.metadata.name === 'notes',
      )!.data.notes as string;
      expect(tlsNotes).toContain('curl -sk https://127.0.0.1:8080/keda/hunt-backlog');
      expect(tlsNotes).not.toContain('http://');
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('monitoring: nothing by default; the monitoring.coreos.com/v1 objects only where the API is seen or forced', () => {
    const kinds = (manifests: Manifest[]) => manifests.map((m) => m.kind).filter((k) => ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'].includes(k)).sort();
    const dashboards = (manifests: Manifest[]) => manifests.filter((m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-dashboard'));
    expect(kinds(render('defaults').manifests)).toEqual([]);
    expect(dashboards(render('defaults').manifests)).toEqual([]);
    const on = { ...CH, monitoring: { monitor: { enabled: true }, rules: { enabled: true } } };
    // Asked for, but the cluster (as helm sees it) has no prometheus-operator: none rendered.
    expect(kinds(helmTemplate(on).manifests)).toEqual([]);
    const seen = helmTemplate(on, CHART, ['--api-versions', 'monitoring.coreos.com/v1']).manifests;
    expect(kinds(seen)).toEqual(['PrometheusRule', 'ServiceMonitor', 'ServiceMonitor']);
    expect(kinds(render('monitoring forced on, dashboard, extra manifests').manifests)).toEqual(['PrometheusRule', 'ServiceMonitor', 'ServiceMonitor']);
    // Monitors off, API there: none.
    expect(kinds(helmTemplate(CH, CHART, ['--api-versions', 'monitoring.coreos.com/v1']).manifests)).toEqual([]);
    // Only the programs rendered get a monitor.
    const runnerOnly = helmTemplate({ ...CH, kedaShim: { enabled: false }, monitoring: { forceApi: true, monitor: { enabled: true } } }).manifests;
    expect(byKind(runnerOnly, 'ServiceMonitor').map((m) => m.metadata.name)).toEqual(['rel-dfe-keda-shim-hunt-runner']);
  });

  it('ServiceMonitors select the Services the chart renders, on their named ports; labels for the Prometheus selector', () => {
    const { manifests } = render('monitoring forced on, dashboard, extra manifests');
    const services = byKind(manifests, 'Service');
    for (const [suffix, port] of [['-shim', 'http'], ['-hunt-runner', 'metrics']] as const) {
      const monitor = one(manifests, 'ServiceMonitor', suffix);
      const service = one(services, 'Service', suffix);
      expect(monitor.metadata.labels?.release).toBe('kube-prometheus-stack');
      expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
      // No other Service matches the selector.
      const matching = services.filter((s) => Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v));
      expect(matching.map((s) => s.metadata.name)).toEqual([service.metadata.name]);
      expect(monitor.spec.namespaceSelector).toEqual({ matchNames: ['dfe'] });
      expect(monitor.spec.endpoints).toEqual([
        {
          port,
          path: '/metrics',
          interval: '30s',
          scrapeTimeout: '10s',
          metricRelabelings: [{ action: 'drop', regex: 'nodejs_gc_.*', sourceLabels: ['__name__'] }],
        },
      ]);
      expect(service.spec.ports.map((p: { name: string }) => p.name)).toContain(port);
    }
    // The runner's metrics Service: headless, selecting the runner pods' metrics port.
    const runnerService = one(services, 'Service', '-hunt-runner');
    const runner = one(manifests, 'Deployment', '-hunt-runner');
    expect(runnerService.spec.clusterIP).toBe('None');
    expect(runnerService.spec.selector).toEqual(runner.spec.selector.matchLabels);
    expect(runnerService.spec.ports).toEqual([{ name: 'metrics', port: 9464, targetPort: 'metrics', protocol: 'TCP' }]);
  });

  it('PodMonitors select the pods; the TLS shim is scraped over https with the given tlsConfig', () => {
    const { manifests } = render('PodMonitors, shim TLS');
    expect(byKind(manifests, 'ServiceMonitor')).toEqual([]);
    const shim = one(manifests, 'PodMonitor', '-shim');
    expect(shim.spec.selector.matchLabels).toEqual(one(manifests, 'Deployment', '-shim').spec.selector.matchLabels);
    expect(shim.spec.podMetricsEndpoints).toEqual([{ port: 'http', path: '/metrics', interval: '30s', scrapeTimeout: '10s', scheme: 'https', tlsConfig: { insecureSkipVerify: true } }]);
    const runner = one(manifests, 'PodMonitor', '-hunt-runner');
    expect(runner.spec.podMetricsEndpoints[0]).toMatchObject({ port: 'metrics' });
    expect(runner.spec.podMetricsEndpoints[0].scheme).toBeUndefined();
  });

  it('the PrometheusRule: thresholds, alert labels and runbook links from values', () => {
    const rulesOf = (values: object) =>
      byKind(helmTemplate({ ...CH, huntRunner: { poll: 30 }, ...values }).manifests, 'PrometheusRule')[0]!.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules) as {
        alert: string;
        expr: string;
        for?: string;
        labels: Record<string, string>;
        annotations: Record<string, string>;
      }[];
    const rules = rulesOf({
      monitoring: {
        forceApi: true,
        rules: { enabled: true, failsafeMinutes: 30, clickhouseFailureRatio: 0.5, fireLatenessSlackSeconds: 45, heartbeatMissingMinutes: 10, alertLabels: { team: 'data' }, runbookBaseUrl: 'https://docs.example/ops/' },
      },
    });
    const rule = (name: string) => rules.find((r) => r.alert === name)!;
    expect(rule('DfeShimServingHeld').for).toBe('30m');
    expect(rule('DfeShimClickHouseFailing').expr).toMatch(/> 0\.5$/);
    expect(rule('DfeHuntFireLate').expr).toMatch(/> 75$/); // poll 30 + 45
    expect(rule('DfeHuntRunnerHeartbeatMissing').expr).toMatch(/> 600$/);
    for (const r of rules) {
      expect(r.labels.team, r.alert).toBe('data');
      expect(['warning', 'critical']).toContain(r.labels.severity);
      expect(r.annotations.runbook_url).toBe(`https://docs.example/ops#${r.alert.toLowerCase()}`);
    }
    // The Prometheus templating passes through helm untouched.
    expect(rule('DfeShimServingHeld').annotations.summary).toBe('Query {{ $labels.query }} answered from the fail-safe path only');
  });

  it('ServiceAccount: one per release, no token; every pod runs as it; an existing one when create is false', () => {
    const { manifests } = render('defaults');
    const account = one(manifests, 'ServiceAccount', 'rel-dfe-keda-shim');
    expect(account.automountServiceAccountToken).toBe(false);
    const pods = manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job');
    expect(pods).toHaveLength(3);
    for (const pod of pods) {
      expect(podSpec(pod).serviceAccountName, pod.metadata.name).toBe(account.metadata.name);
      expect(podSpec(pod).automountServiceAccountToken, pod.metadata.name).toBe(false);
    }
    const existing = helmTemplate({ ...CH, serviceAccount: { create: false, name: 'platform-sa' } }).manifests;
    expect(byKind(existing, 'ServiceAccount')).toEqual([]);
    for (const pod of existing.filter((m) => m.kind === 'Deployment' || m.kind === 'Job')) expect(podSpec(pod).serviceAccountName).toBe('platform-sa');
    const annotated = helmTemplate({ ...CH, serviceAccount: { annotations: { 'iam.example/role': 'dfe' } } }).manifests;
    expect(one(annotated, 'ServiceAccount', 'rel-dfe-keda-shim').metadata.annotations).toEqual({ 'iam.example/role': 'dfe' });
  });

  it('the dashboard ConfigMap: the sidecar label, the repository JSON verbatim', () => {
    const { manifests } = render('monitoring forced on, dashboard, extra manifests');
    const configMap = one(manifests, 'ConfigMap', '-dashboard');
    expect(configMap.metadata.labels?.grafana_dashboard).toBe('1');
    expect(configMap.data['dfe-keda-shim.json']).toBe(readFileSync(join(CHART, 'dashboards', 'dfe-keda-shim.json'), 'utf8'));
    const elsewhere = helmTemplate({ ...CH, monitoring: { dashboard: { enabled: true, namespace: 'monitoring', labels: { grafana_dashboard: '1', team: 'data' } } } }).manifests;
    expect(one(elsewhere, 'ConfigMap', '-dashboard').metadata).toMatchObject({ namespace: 'monitoring', labels: { grafana_dashboard: '1', team: 'data' } });
  });

  it('extraManifests: objects and YAML text, both through tpl', () => {
    const { manifests } = render('monitoring forced on, dashboard, extra manifests');
    expect(one(manifests, 'ConfigMap', 'rel-extra').data).toEqual({ release: 'rel' });
    expect(one(manifests, 'Secret', 'rel-extra-text').stringData).toEqual({ ns: 'dfe' });
  });

  it('rejects values that would deploy something broken, naming the key', () => {
    const bad: [object, RegExp][] = [
      [{ huntRunner: { autoscaling: { minReplicaCount: -1 } } }, /minReplicaCount/],
      [{ kedaShim: { auth: { enabled: true, mode: 'bearer' } } }, /kedaShim\.auth\.existingSecret/],
      [{ kedaShim: { auth: { enabled: true, mode: 'digest', existingSecret: 's' } } }, /mode/],
      [{ huntRunner: { gitSync: { enabled: true } } }, /huntRunner\.gitSync\.repo/],
      [{ clickhouse: { host: '', url: '' } }, /clickhouse\.url or clickhouse\.host/],
      [{ kedaShim: { replica: 3 } }, /replica/],
      [{ kedaShim: { tls: { enabled: true } } }, /kedaShim\.tls\.existingSecret/],
      [{ clickhouse: { caCert: { existingSecret: 'ch-ca', key: '' } } }, /caCert/],
      [{ huntRunner: { extraVolumes: { name: 'x' } } }, /extraVolumes/],
      [{ monitoring: { monitor: { enabled: true, kind: 'Probe' } } }, /kind/],
      [{ monitoring: { rules: { clickhouseFailureRatio: 25 } } }, /clickhouseFailureRatio/],
      [{ serviceAccount: { create: 'yes' } }, /create/],
      [{ backlog: { refreshSeconds: 3601 } }, /backlog\/refreshSeconds/],
      [{ backlog: { refreshSeconds: -1 } }, /backlog\/refreshSeconds/],
      [{ backlog: { refreshSeconds: 'abc' } }, /backlog\/refreshSeconds/],
      [{ backlog: { refreshSeconds: 1.5 } }, /backlog\/refreshSeconds/],
      // The ScaledObject would poll a shim Service this release does not create.
      [{ kedaShim: { enabled: false }, huntRunner: { autoscaling: { enabled: true } } }, /huntRunner\.autoscaling\.shimAddress/],
    ];
    for (const [values, message] of bad) expect(() => helmTemplate(values), JSON.stringify(values)).toThrow(message);
  });
});
