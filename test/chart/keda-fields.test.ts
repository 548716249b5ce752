/**
 * issue 28 part 3: the ScaledObject fields of KEDA 2.17–2.20 on the runner's ScaledObject and
 * in the pressure trigger template, rendered by the real helm and validated by kubeconform
 * -strict against KEDA 2.20's CRDs (test/chart/crds). Their defaults keep today's output.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KEDA_DEFAULT_HTTP_TIMEOUT_MS } from '../../src/catalogue/definition.js';
import { QUERY_DEFAULTS } from '../../src/catalogue/types.js';
import { CHART, byKind, helmTemplate, kubeconform, missing, prepareSchemas, type Manifest } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';

const CH = { clickhouse: { url: 'https://clickhouse.example:8443', existingSecret: 'ch-password' } };
const skip = missing('helm');
const skipValidation = skip ?? missing('kubeconform', 'openApiSpec', 'crdsDir');

/** Every new field on at once. */
const ALL_ON = {
  ...CH,
  kedaShim: { queryOverride: { backlog: { deadline_ms: 2500 } } },
  huntRunner: {
    autoscaling: {
      enabled: true,
      minReplicaCount: 1,
      triggerName: 'backlog',
      initialCooldownPeriod: 120,
      idleReplicaCount: 0,
      paused: true,
      pausedReplicas: 2,
      pausedScaleIn: true,
      pausedScaleOut: true,
      fallback: { enabled: true, behavior: 'scalingModifiers' },
      advanced: {
        horizontalPodAutoscalerConfig: {
          name: 'dfe-runner-hpa',
          behavior: { scaleDown: { stabilizationWindowSeconds: 600, policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }] } },
        },
        scalingModifiers: { formula: 'min(backlog, 40)', target: '10', activationTarget: '1', metricType: 'AverageValue' },
      },
    },
  },
};

const scaledObject = (values: object): Manifest => {
  const found = byKind(helmTemplate(values).manifests, 'ScaledObject');
  expect(found).toHaveLength(1);
  return found[0]!;
};
const renderError = (values: object, chart = CHART): string => {
  try {
    helmTemplate(values, chart);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the chart rendered');
};
const autoscaling = (extra: object) => ({ ...CH, huntRunner: { autoscaling: { enabled: true, ...extra } } });

it("the chart's constants are the catalogue's (deadline_ms default, KEDA's default HTTP timeout)", () => {
  const tpl = readFileSync(join(CHART, 'templates', '_keda.tpl'), 'utf8');
  expect(/define "dfe-keda-shim\.catalogueDeadlineMs" -\}\}(\d+)\{\{/.exec(tpl)?.[1]).toBe(String(QUERY_DEFAULTS.deadlineMs));
  expect(/define "dfe-keda-shim\.kedaHttpTimeoutMs" -\}\}(\d+)\{\{/.exec(tpl)?.[1]).toBe(String(KEDA_DEFAULT_HTTP_TIMEOUT_MS));
});

needs(skip).describe("the runner's ScaledObject", () => {
  it('at the defaults renders exactly the fields it rendered before', () => {
    const so = scaledObject(autoscaling({}));
    expect(so.metadata.annotations).toEqual({ 'dfe.io/stability': 'beta' });
    expect(Object.keys(so.spec)).toEqual(['scaleTargetRef', 'minReplicaCount', 'maxReplicaCount', 'cooldownPeriod', 'pollingInterval', 'triggers']);
    expect(so.spec.triggers[0].name).toBe('hunt-backlog');
    expect(Object.keys(so.spec.triggers[0].metadata)).toEqual(['targetValue', 'url', 'valueLocation']);
  });

  it('renders every new field when set', () => {
    const so = scaledObject(ALL_ON);
    expect(so.metadata.annotations).toEqual({
      'dfe.io/stability': 'beta',
      'autoscaling.keda.sh/paused': 'true',
      'autoscaling.keda.sh/paused-replicas': '2',
      'autoscaling.keda.sh/paused-scale-in': 'true',
      'autoscaling.keda.sh/paused-scale-out': 'true',
    });
    expect({ initial: so.spec.initialCooldownPeriod, idle: so.spec.idleReplicaCount, fallback: so.spec.fallback }).toEqual({
      initial: 120,
      idle: 0,
      fallback: { failureThreshold: 3, replicas: 1, behavior: 'scalingModifiers' },
    });
    expect(so.spec.advanced).toEqual({
      horizontalPodAutoscalerConfig: ALL_ON.huntRunner.autoscaling.advanced.horizontalPodAutoscalerConfig,
      scalingModifiers: { formula: 'min(backlog, 40)', target: '10', activationTarget: '1', metricType: 'AverageValue' },
    });
    expect(so.spec.triggers[0]).toMatchObject({ name: 'backlog', metadata: { timeout: '3500' } });
  });

  it("the trigger timeout is the backlog query's deadline_ms + 1000, rendered above KEDA's 3000 ms default only", () => {
    const timeout = (deadline: number | undefined, timeoutMs?: number) =>
      scaledObject({
        ...autoscaling(timeoutMs === undefined ? {} : { triggerTimeoutMs: timeoutMs }),
        kedaShim: { queryOverride: deadline === undefined ? {} : { backlog: { deadline_ms: deadline } } },
      }).spec.triggers[0].metadata.timeout as string | undefined;
    expect(timeout(undefined)).toBeUndefined();
    expect(timeout(2000)).toBeUndefined();
    expect(timeout(2001)).toBe('3001');
    expect(timeout(4000)).toBe('5000');
    expect(timeout(undefined, 2500)).toBe('2500');
    expect(renderError({ ...autoscaling({ triggerTimeoutMs: 2000 }) })).toContain(
      "huntRunner.autoscaling.triggerTimeoutMs: the trigger timeout 2000 ms must exceed the query's deadline_ms 2000, or KEDA gives up before the shim answers",
    );
  });

  it("KEDA's rules fail the render with a message naming the value", () => {
    expect(renderError(autoscaling({ idleReplicaCount: 1, minReplicaCount: 1 }))).toContain('huntRunner.autoscaling.idleReplicaCount 1 must be below minReplicaCount 1');
    expect(renderError(autoscaling({ triggerName: 'backlog', advanced: { scalingModifiers: { formula: 'backlog' } } }))).toContain('scalingModifiers.target is required with a formula');
    expect(renderError(autoscaling({ fallback: { enabled: true, behavior: 'scalingModifiers' } }))).toContain('fallback.behavior scalingModifiers needs advanced.scalingModifiers.formula');
    expect(renderError(autoscaling({ advanced: { scalingModifiers: { formula: 'hunt-backlog * 2', target: '5' } } }))).toContain(
      'huntRunner.autoscaling.triggerName "hunt-backlog" cannot be used in the scalingModifiers formula',
    );
  });

  it('names longer than 63 characters fail the render, naming the value', () => {
    expect(renderError(autoscaling({ advanced: { horizontalPodAutoscalerConfig: { name: 'h'.repeat(64) } } }))).toMatch(/horizontalPodAutoscalerConfig\/name.*(length|maxLength|63)/);
    expect(renderError(autoscaling({ triggerName: 't'.repeat(64) }))).toMatch(/triggerName.*(length|maxLength|63)/);
    // The release-derived ScaledObject name is cut to fit by the name helpers: a long release still renders.
    expect(scaledObject({ ...autoscaling({}), fullnameOverride: 'f'.repeat(80) }).metadata.name.length).toBeLessThanOrEqual(63);
  });

  needs(skipValidation).it("validates against KEDA 2.20's CRD with every new field on (kubeconform -strict)", () => {
    const result = kubeconform(prepareSchemas(), helmTemplate(ALL_ON).yaml);
    const invalid = result.resources.filter((r) => r.status !== 'statusValid');
    expect(invalid, result.raw).toEqual([]);
    expect(result.resources.some((r) => r.kind === 'ScaledObject' && r.status === 'statusValid')).toBe(true);
  });
});

needs(skip).describe('the pressure trigger template', () => {
  let appChart = '';
  beforeAll(() => {
    appChart = mkdtempSync(join(tmpdir(), 'dfe-keda-fields-app-'));
    writeFileSync(join(appChart, 'Chart.yaml'), 'apiVersion: v2\nname: app\nversion: 0.1.0\n');
    writeFileSync(join(appChart, 'values.yaml'), 'dfe-keda-shim:\n  kedaShim: {enabled: false}\n  huntRunner: {enabled: false}\n');
    mkdirSync(join(appChart, 'templates'));
    writeFileSync(
      join(appChart, 'templates', 'scaledobject.yaml'),
      `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: dfe-loader
spec:
  scaleTargetRef:
    name: dfe-loader
  minReplicaCount: 1
  maxReplicaCount: 10
  advanced:
    scalingModifiers:
      formula: "max(pressure, cpu_load)"
      target: "70"
      metricType: Value
  triggers:
    {{- include "dfe-keda-shim.pressureTriggers" .Values.pressure | nindent 4 }}
`,
    );
    cpSync(CHART, join(appChart, 'charts', 'dfe-keda-shim'), { recursive: true });
  });
  afterAll(() => rmSync(appChart, { recursive: true, force: true }));

  const shimAddress = 'http://dfe-keda-shim-shim.dfe.svc.cluster.local:8080';
  const triggers = (pressure: object) => helmTemplate({ pressure: { service: 'dfe-loader', shimAddress, ...pressure } }, appChart).manifests[0]!.spec.triggers;

  it('names the triggers for a formula and derives the timeout from the pressure deadline_ms', () => {
    const [cpu, pressure] = triggers({ name: 'pressure', cpuName: 'cpu_load', deadlineMs: 2600 });
    expect({ cpu: cpu.name, pressure: pressure.name, timeout: pressure.metadata.timeout }).toEqual({ cpu: 'cpu_load', pressure: 'pressure', timeout: '3600' });
    expect(triggers({ timeoutMs: 4000 })[1].metadata.timeout).toBe('4000');
  });

  it('at the defaults renders what it rendered before: no timeout, the old names', () => {
    const [cpu, pressure] = triggers({});
    expect([cpu.name, pressure.name, 'timeout' in pressure.metadata]).toEqual(['cpu', 'scaling-pressure', false]);
  });

  it('refuses a timeout KEDA would give up before the shim answers, and a name over 63 characters', () => {
    expect(renderError({ pressure: { service: 'dfe-loader', shimAddress, deadlineMs: 2500, timeoutMs: 2500 } }, appChart)).toContain(
      "dfe-keda-shim.pressureTriggers: the trigger timeout 2500 ms must exceed the query's deadline_ms 2500",
    );
    expect(renderError({ pressure: { service: 'dfe-loader', shimAddress, name: 'p'.repeat(64) } }, appChart)).toContain(
      'dfe-keda-shim.pressureTriggers: name "' + 'p'.repeat(64) + '" is 64 characters; KEDA and Kubernetes take at most 63',
    );
  });

  needs(skipValidation).it("the app's ScaledObject with named triggers, a formula and a timeout validates against KEDA 2.20's CRD", () => {
    const { yaml } = helmTemplate({ pressure: { service: 'dfe-loader', shimAddress, name: 'pressure', cpuName: 'cpu_load', deadlineMs: 2600 } }, appChart);
    const result = kubeconform(prepareSchemas(), yaml);
    expect(result.resources.filter((r) => r.status !== 'statusValid'), result.raw).toEqual([]);
    expect(result.resources).toHaveLength(1);
  });
});
