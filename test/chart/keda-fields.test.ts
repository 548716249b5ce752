/**
 * issue 28 part 3: the ScaledObject fields of KEDA 2.17–2.20 on the runner's ScaledObject and
 * in the pressure trigger template, rendered by the real helm and validated by kubeconform
 * -strict against KEDA 2.20's CRDs (test/chart/crds). Their defaults keep today's output.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KEDA_DEFAULT_HTTP_TIMEOUT_MS } from '../../src/catalogue/definition.js';
import { QUERY_DEFAULTS } from '../../src/catalogue/types.js';
import { CHART, byKind, helmTemplate, kubeconform, missing, prepareSchemas, type Manifest } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';
import { ALL_ON, KEDA_FIELDS_CLICKHOUSE, PRESSURE_ALL_ON, PRESSURE_SHIM_ADDRESS, pressureAppChart, type PressureAppChart } from '../helpers/keda-fields.js';

const CH = KEDA_FIELDS_CLICKHOUSE;
const skip = missing('helm');
const skipValidation = skip ?? missing('kubeconform', 'openApiSpec', 'crdsDir');

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
  let app: PressureAppChart;
  beforeAll(() => {
    app = pressureAppChart();
  });
  afterAll(() => app.remove());

  const shimAddress = PRESSURE_SHIM_ADDRESS;
  const triggers = (pressure: object) => helmTemplate({ pressure: { service: 'dfe-loader', shimAddress, ...pressure } }, app.dir).manifests[0]!.spec.triggers;

  it('names the triggers for a formula and derives the timeout from the pressure deadline_ms', () => {
    const [cpu, pressure] = triggers(PRESSURE_ALL_ON);
    expect({ cpu: cpu.name, pressure: pressure.name, timeout: pressure.metadata.timeout }).toEqual({ cpu: 'cpu_load', pressure: 'pressure', timeout: '3600' });
    expect(triggers({ timeoutMs: 4000 })[1].metadata.timeout).toBe('4000');
  });

  it('at the defaults renders what it rendered before: no timeout, the old names', () => {
    const [cpu, pressure] = triggers({});
    expect([cpu.name, pressure.name, 'timeout' in pressure.metadata]).toEqual(['cpu', 'scaling-pressure', false]);
  });

  it('refuses a timeout KEDA would give up before the shim answers, and a name over 63 characters', () => {
    expect(renderError({ pressure: { service: 'dfe-loader', shimAddress, deadlineMs: 2500, timeoutMs: 2500 } }, app.dir)).toContain(
      "dfe-keda-shim.pressureTriggers: the trigger timeout 2500 ms must exceed the query's deadline_ms 2500",
    );
    expect(renderError({ pressure: { service: 'dfe-loader', shimAddress, name: 'p'.repeat(64) } }, app.dir)).toContain(
      'dfe-keda-shim.pressureTriggers: name "' + 'p'.repeat(64) + '" is 64 characters; KEDA and Kubernetes take at most 63',
    );
  });

  needs(skipValidation).it("the app's ScaledObject with named triggers, a formula and a timeout validates against KEDA 2.20's CRD", () => {
    const { yaml } = helmTemplate({ pressure: PRESSURE_ALL_ON }, app.dir);
    const result = kubeconform(prepareSchemas(), yaml);
    expect(result.resources.filter((r) => r.status !== 'statusValid'), result.raw).toEqual([]);
    expect(result.resources).toHaveLength(1);
  });
});
