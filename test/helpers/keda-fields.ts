import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHART } from './tools.js';

/**
 * The KEDA 2.17–2.20 ScaledObject fields of issue 28 part 3, every one switched on: one value
 * set for the runner's ScaledObject and one for an app chart that uses the pressure trigger
 * template with a formula. test/chart/keda-fields.test.ts renders and validates them with
 * kubeconform; the e2e lane (test/e2e/keda-fields.ts) applies the same objects to a real
 * apiserver with KEDA's CRDs and operator.
 */

export const KEDA_FIELDS_CLICKHOUSE = { clickhouse: { url: 'https://clickhouse.example:8443', existingSecret: 'ch-password' } };

/** The runner's ScaledObject with every new field on at once. */
export const ALL_ON = {
  ...KEDA_FIELDS_CLICKHOUSE,
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

/** The app's formula. KEDA leaves cpu and memory triggers out of a formula (they stay beside the composite metric in the HPA), so it names the pressure trigger only. */
export const PRESSURE_FORMULA = 'min(pressure, 500)';
export const PRESSURE_SHIM_ADDRESS = 'http://dfe-keda-shim-shim.dfe.svc.cluster.local:8080';

/** The pressure template's values with every new field on: named triggers and a timeout from deadline_ms. */
export const PRESSURE_ALL_ON = { service: 'dfe-loader', shimAddress: PRESSURE_SHIM_ADDRESS, name: 'pressure', cpuName: 'cpu_load', deadlineMs: 2600 };

export interface PressureAppChart {
  /** The chart's directory (this chart a dependency of it). */
  readonly dir: string;
  remove(): void;
}

/** An app chart whose ScaledObject `dfe-loader` takes its triggers from the pressure template and has a formula. */
export function pressureAppChart(): PressureAppChart {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-keda-fields-app-'));
  writeFileSync(join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: app\nversion: 0.1.0\n');
  writeFileSync(join(dir, 'values.yaml'), 'dfe-keda-shim:\n  kedaShim: {enabled: false}\n  huntRunner: {enabled: false}\n');
  mkdirSync(join(dir, 'templates'));
  writeFileSync(
    join(dir, 'templates', 'scaledobject.yaml'),
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
      formula: "${PRESSURE_FORMULA}"
      target: "70"
      metricType: Value
  triggers:
    {{- include "dfe-keda-shim.pressureTriggers" .Values.pressure | nindent 4 }}
`,
  );
  cpSync(CHART, join(dir, 'charts', 'dfe-keda-shim'), { recursive: true });
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
