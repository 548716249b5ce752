/**
 * The named template apps include for the pressure trigger, exercised the way an app uses
 * it: a tiny app chart with dfe-keda-shim as a subchart (both programs disabled, so only the
 * template is borrowed) whose ScaledObject includes `dfe-keda-shim.pressureTriggers`.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CHART, byKind, helmTemplate, kubeconform, missing, prepareSchemas } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';

const APP_SCALED_OBJECT = `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {{ .Values.app }}
spec:
  scaleTargetRef:
    name: {{ .Values.app }}
  minReplicaCount: 1
  maxReplicaCount: 10
  triggers:
    {{- include "dfe-keda-shim.pressureTriggers" .Values.pressure | nindent 4 }}
`;

const skip = missing('helm');

needs(skip).describe('dfe-keda-shim.pressureTriggers', () => {
  let appChart = '';
  beforeAll(() => {
    appChart = mkdtempSync(join(tmpdir(), 'dfe-app-chart-'));
    writeFileSync(join(appChart, 'Chart.yaml'), 'apiVersion: v2\nname: app\nversion: 0.1.0\n');
    writeFileSync(
      join(appChart, 'values.yaml'),
      'app: dfe-loader\ndfe-keda-shim:\n  kedaShim: {enabled: false}\n  huntRunner: {enabled: false}\n',
    );
    mkdirSync(join(appChart, 'templates'));
    writeFileSync(join(appChart, 'templates', 'scaledobject.yaml'), APP_SCALED_OBJECT);
    cpSync(CHART, join(appChart, 'charts', 'dfe-keda-shim'), { recursive: true });
  });
  afterAll(() => rmSync(appChart, { recursive: true, force: true }));

  const shimAddress = 'http://dfe-keda-shim-shim.dfe.svc.cluster.local:8080';

  it('renders CPU as the default trigger and the pressure trigger as Value with hold = target', () => {
    const { manifests } = helmTemplate({ pressure: { service: 'dfe-loader', shimAddress: `${shimAddress}/`, target: 70 } }, appChart);
    // The subchart, with both programs off, renders nothing of its own.
    expect(manifests.map((m) => m.kind)).toEqual(['ScaledObject']);
    expect(manifests[0]!.spec.triggers).toEqual([
      { type: 'cpu', name: 'cpu', metricType: 'Utilization', metadata: { value: '70' } },
      {
        type: 'metrics-api',
        name: 'scaling-pressure',
        metricType: 'Value',
        metadata: {
          targetValue: '70',
          activationTargetValue: '0',
          url: `${shimAddress}/keda/pressure?service=dfe-loader&hold=70`,
          valueLocation: 'value',
        },
      },
    ]);
  });

  it('takes a fractional target, no CPU trigger, and a TriggerAuthentication', () => {
    const { manifests } = helmTemplate(
      { pressure: { service: 'dfe-loader', shimAddress, target: 62.5, cpu: false, authenticationRef: 'shim-auth', authMode: 'bearer' } },
      appChart,
    );
    expect(byKind(manifests, 'ScaledObject')[0]!.spec.triggers).toEqual([
      {
        type: 'metrics-api',
        name: 'scaling-pressure',
        metricType: 'Value',
        metadata: { targetValue: '62.5', activationTargetValue: '0', url: `${shimAddress}/keda/pressure?service=dfe-loader&hold=62.5`, valueLocation: 'value', authMode: 'bearer' },
        authenticationRef: { name: 'shim-auth' },
      },
    ]);
  });

  it('activation: a hold answer (= target) counts as active; an activationTarget at or past the target is refused', () => {
    const render = (extra: Record<string, unknown>) =>
      helmTemplate({ pressure: { service: 'dfe-loader', shimAddress, target: 70, cpu: false, ...extra } }, appChart);
    const metadata = (extra: Record<string, unknown>) => byKind(render(extra).manifests, 'ScaledObject')[0]!.spec.triggers[0].metadata;
    expect(metadata({})).toMatchObject({ targetValue: '70', activationTargetValue: '0' });
    expect(metadata({ activationTarget: 5.5 })).toMatchObject({ activationTargetValue: '5.5' });
    expect(() => render({ activationTarget: 70 })).toThrow(/activationTarget 70 must be below target 70/);
    expect(() => render({ activationTarget: 90 })).toThrow(/must be below target/);
  });

  it('names the missing parameter', () => {
    expect(() => helmTemplate({ pressure: { shimAddress } }, appChart)).toThrow(/service is required/);
    expect(() => helmTemplate({ pressure: { service: 'x' } }, appChart)).toThrow(/shimAddress is required/);
  });

  needs(missing('kubeconform', 'openApiSpec', 'crdsDir')).it('renders a ScaledObject that kubeconform accepts', () => {
    const location = prepareSchemas();
    const { yaml } = helmTemplate({ pressure: { service: 'dfe-loader', shimAddress } }, appChart);
    const result = kubeconform(location, yaml);
    expect(result.resources.map((r) => r.status), result.raw).toEqual(['statusValid']);
  });
});
