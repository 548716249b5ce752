/**
 * keda.triggerType: the runner's ScaledObject as KEDA's metrics-api, external or external-push
 * trigger, and the shim's gRPC port opened (container, Service, NetworkPolicy, env) only for the
 * gRPC types; rendered by the real helm and validated by kubeconform against KEDA's CRDs.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { byKind, helmTemplate, kubeconform, missing, prepareSchemas, run, tools, CHART, KUBE_VERSION, type Manifest } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';

const CH = { clickhouse: { url: 'https://clickhouse.example:8443', existingSecret: 'ch-password' } };
const AUTOSCALING = { huntRunner: { autoscaling: { enabled: true, minReplicaCount: 0, targetBacklog: 4 } } };
const MTLS = { tls: { enabled: true, existingSecret: 'shim-tls', clientAuth: { enabled: true, caSecret: 'keda-client-ca', kedaSecret: 'keda-client' } } };

const CASES: Record<string, object> = {
  'metrics-api (default)': { ...CH, ...AUTOSCALING },
  external: { ...CH, ...AUTOSCALING, keda: { triggerType: 'external' } },
  'external-push': { ...CH, ...AUTOSCALING, keda: { triggerType: 'external-push' }, kedaShim: { networkPolicy: { enabled: true } } },
  'external-push, mTLS': { ...CH, ...AUTOSCALING, keda: { triggerType: 'external-push' }, kedaShim: { grpcPort: 9443, ...MTLS } },
  'external-push, runner only': {
    ...CH,
    keda: { triggerType: 'external-push' },
    kedaShim: { enabled: false },
    huntRunner: { autoscaling: { enabled: true, scalerAddress: 'shim.dfe.svc:9090' } },
  },
};

const skip = missing('helm');
const skipValidation = skip ?? missing('kubeconform', 'openApiSpec', 'crdsDir');

const one = (manifests: Manifest[], kind: string, suffix: string): Manifest => {
  const found = manifests.filter((m) => m.kind === kind && m.metadata.name.endsWith(suffix));
  expect(found, `${kind} *${suffix}`).toHaveLength(1);
  return found[0]!;
};
const shimContainer = (manifests: Manifest[]) => one(manifests, 'Deployment', '-shim').spec.template.spec.containers.find((c: { name: string }) => c.name === 'shim');
const envOf = (c: { env: { name: string; value?: string }[] }) => Object.fromEntries(c.env.map((e) => [e.name, e.value]));

needs(skip).describe('keda.triggerType', () => {
  needs(skipValidation).describe('kubeconform against KEDA CRDs', () => {
    let schemaLocation = '';
    beforeAll(() => {
      schemaLocation = prepareSchemas();
    });
    it.each(Object.keys(CASES))('validates every object of "%s" strictly', (name) => {
      const { yaml, manifests } = helmTemplate(CASES[name]!);
      const result = kubeconform(schemaLocation, yaml);
      expect(result.resources.filter((r) => r.status !== 'statusValid'), result.raw).toEqual([]);
      expect(result.status, result.raw).toBe(0);
      expect(result.resources.map((r) => `${r.kind}/${r.name}`).sort()).toEqual(manifests.map((m) => `${m.kind}/${m.metadata.name}`).sort());
    });
  });

  it('passes helm lint for every case', () => {
    for (const [name, values] of Object.entries(CASES)) {
      const result = run(tools.helm!, ['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '--values', '-'], JSON.stringify(values));
      expect(result.status, `${name}: ${result.stdout}${result.stderr}`).toBe(0);
    }
  });

  it('metrics-api: the HTTP trigger, no gRPC port anywhere', () => {
    const { manifests } = helmTemplate(CASES['metrics-api (default)']!);
    expect(one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0]).toMatchObject({ type: 'metrics-api', metadata: { url: expect.stringMatching(/\/keda\/hunt-backlog$/) } });
    const shim = shimContainer(manifests);
    expect(shim.ports.map((p: { name: string }) => p.name)).toEqual(['http']);
    expect(envOf(shim).DFE_KEDA_SHIM_GRPC_PORT).toBeUndefined();
    expect(one(manifests, 'Service', '-shim').spec.ports.map((p: { name: string }) => p.name)).toEqual(['http']);
  });

  it.each(['external', 'external-push'])('%s: the metadata mirrors the HTTP URL, the gRPC port is open on the pod, Service and policy', (type) => {
    const { manifests } = helmTemplate(type === 'external' ? CASES.external! : CASES['external-push']!);
    expect(one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers).toEqual([
      {
        type,
        name: 'hunt-backlog',
        metricType: 'AverageValue',
        metadata: { scalerAddress: 'rel-dfe-keda-shim-shim.dfe.svc.cluster.local:9090', query: 'backlog', targetValue: '4' },
      },
    ]);
    const shim = shimContainer(manifests);
    expect(shim.ports).toContainEqual({ name: 'grpc', containerPort: 9090, protocol: 'TCP' });
    expect(envOf(shim).DFE_KEDA_SHIM_GRPC_PORT).toBe('9090');
    expect(one(manifests, 'Service', '-shim').spec.ports).toContainEqual({ name: 'grpc', port: 9090, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' });
    if (type === 'external-push') {
      const policy = one(manifests, 'NetworkPolicy', '-shim');
      expect(policy.spec.ingress[0].ports).toContainEqual({ port: 'grpc', protocol: 'TCP' });
    }
  });

  it('mTLS: enableTLS and a TriggerAuthentication with the external scaler parameter names', () => {
    const { manifests } = helmTemplate(CASES['external-push, mTLS']!);
    const trigger = one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0];
    expect(trigger.metadata).toMatchObject({ scalerAddress: 'rel-dfe-keda-shim-shim.dfe.svc.cluster.local:9443', enableTLS: 'true' });
    const auth = byKind(manifests, 'TriggerAuthentication')[0]!;
    expect(trigger.authenticationRef).toEqual({ name: auth.metadata.name });
    expect(auth.spec.secretTargetRef.map((r: { parameter: string; key: string }) => `${r.parameter}=${r.key}`)).toEqual([
      'tlsClientCert=tls.crt',
      'tlsClientKey=tls.key',
      'caCert=ca.crt',
    ]);
    expect(envOf(shimContainer(manifests))).toMatchObject({ DFE_KEDA_SHIM_GRPC_PORT: '9443', DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: expect.any(String) });
  });

  it('runner only: the configured scalerAddress', () => {
    const { manifests } = helmTemplate(CASES['external-push, runner only']!);
    expect(one(manifests, 'ScaledObject', '-hunt-runner').spec.triggers[0].metadata.scalerAddress).toBe('shim.dfe.svc:9090');
  });

  it('refuses kedaShim.auth with a gRPC type, an unknown type, and runner only without scalerAddress', () => {
    const fails = (values: object) => {
      const result = run(tools.helm!, ['template', 'rel', CHART, '--values', '-'], JSON.stringify(values));
      expect(result.status).not.toBe(0);
      return result.stderr;
    };
    expect(fails({ ...CH, ...AUTOSCALING, keda: { triggerType: 'external' }, kedaShim: { auth: { enabled: true, existingSecret: 's' } } })).toMatch(
      /keda.triggerType external cannot use kedaShim.auth/,
    );
    expect(fails({ ...CH, keda: { triggerType: 'grpc' } })).toMatch(/triggerType/);
    expect(fails({ ...CH, keda: { triggerType: 'external' }, kedaShim: { enabled: false }, huntRunner: { autoscaling: { enabled: true, shimAddress: 'http://x:8080' } } })).toMatch(
      /scalerAddress is required/,
    );
  });
});

/** An app chart borrowing the pressure template, as test/chart/pressure-template.test.ts builds it. */
const APP_SCALED_OBJECT = `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: app
spec:
  scaleTargetRef:
    name: app
  triggers:
    {{- include "dfe-keda-shim.pressureTriggers" .Values.pressure | nindent 4 }}
`;

needs(skip).describe('dfe-keda-shim.pressureTriggers with a gRPC triggerType', () => {
  let appChart = '';
  beforeAll(() => {
    appChart = mkdtempSync(join(tmpdir(), 'dfe-app-chart-'));
    writeFileSync(join(appChart, 'Chart.yaml'), 'apiVersion: v2\nname: app\nversion: 0.1.0\n');
    writeFileSync(join(appChart, 'values.yaml'), 'dfe-keda-shim:\n  kedaShim: {enabled: false}\n  huntRunner: {enabled: false}\n');
    mkdirSync(join(appChart, 'templates'));
    writeFileSync(join(appChart, 'templates', 'scaledobject.yaml'), APP_SCALED_OBJECT);
    cpSync(CHART, join(appChart, 'charts', 'dfe-keda-shim'), { recursive: true });
  });
  afterAll(() => rmSync(appChart, { recursive: true, force: true }));

  it('renders the metadata the HTTP URL would carry: query, service, hold = target', () => {
    const { manifests } = helmTemplate({ pressure: { service: 'dfe-loader', triggerType: 'external-push', scalerAddress: 'shim.dfe.svc:9090', target: 70, cpu: false, enableTLS: true } }, appChart);
    expect(manifests[0]!.spec.triggers).toEqual([
      {
        type: 'external-push',
        name: 'scaling-pressure',
        metricType: 'Value',
        metadata: { scalerAddress: 'shim.dfe.svc:9090', query: 'pressure', service: 'dfe-loader', hold: '70', targetValue: '70', activationTargetValue: '0', enableTLS: 'true' },
      },
    ]);
  });

  needs(skipValidation).it('passes kubeconform against KEDA CRDs', () => {
    const { yaml } = helmTemplate({ pressure: { service: 'dfe-loader', triggerType: 'external', scalerAddress: 'shim.dfe.svc:9090' } }, appChart);
    const result = kubeconform(prepareSchemas(), yaml);
    expect(result.status, result.raw).toBe(0);
    expect(result.resources.map((r) => r.status)).toEqual(['statusValid']);
  });

  it('needs scalerAddress for a gRPC type', () => {
    const result = run(tools.helm!, ['template', 'app', appChart, '--values', '-'], JSON.stringify({ pressure: { service: 'x', triggerType: 'external-push', shimAddress: 'http://x:8080' } }));
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/scalerAddress \(host:port of the shim's gRPC port\) is required with triggerType external-push/);
  });
});
