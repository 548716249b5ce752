import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The e2e lane's figures (a real kube-apiserver, the HPA controller and KEDA; test/e2e) as
 * docs/control-plane.json, written by one run of `DFE_E2E_WRITE_FIGURES=1 npm run test:e2e`,
 * and their section of docs/performance.md ("On a real control plane"). The times are what
 * the lane saw while it asserted replica counts; they are never asserted themselves.
 */

const ms = z.number().int().nonnegative();
const version = z.string().regex(/^v\d+\.\d+\.\d+/, 'is not a version (vX.Y.Z)');
const trigger = z.object({
  /** 5 due hunts pushed with the count at 0 → spec.replicas 3. */
  zeroToThreeMs: ms,
  /** 4 more due hunts (9) → spec.replicas 3 → 5. */
  valueChangeMs: ms,
  /** `dfe-hunt-runner run-now` returned, at 0 replicas → spec.replicas 1. */
  runNowMs: ms,
});

export const controlPlaneRecordSchema = z.strictObject({
  run: z.iso.datetime(),
  machine: z.string().min(1),
  loadAverage: z.strictObject({ atStart: z.number().nonnegative(), atEnd: z.number().nonnegative() }),
  versions: z.strictObject({ kubernetes: version, etcd: version, keda: version }),
  /** kube-controller-manager's --horizontal-pod-autoscaler-sync-period. */
  hpaSyncSeconds: z.number().positive(),
  /** The ScaledObjects' pollingInterval. */
  pollingIntervalSeconds: z.number().positive(),
  /** The shim's StreamIsActive check interval (external-push). */
  grpcCheckMs: z.number().positive(),
  /** First spawn (etcd) to the external metrics API answering through the aggregator. */
  startMs: ms,
  /** Summed RSS of etcd, kube-apiserver, kube-controller-manager, KEDA's operator and metrics apiserver. */
  rssMiB: z.strictObject({ atStart: z.number().nonnegative(), atEnd: z.number().nonnegative() }),
  metricsApi: trigger,
  externalPush: trigger,
  /** Pressure 100 against a target of 50 on a Value trigger: 1 → 6 replicas. */
  pressureScaleOutMs: ms,
  /** The override ConfigMap's value changed 4 → 2 while KEDA polls: spec.replicas 4 → 2. */
  catalogueReloadMs: ms,
});

export type ControlPlaneRecord = z.infer<typeof controlPlaneRecordSchema>;

export const CONTROL_PLANE_FILE = join('docs', 'control-plane.json');

/** Parses a record; a bad one is an error naming the file, the key and the value's problem. */
export function parseControlPlaneRecord(text: string, file: string): ControlPlaneRecord {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file}: not JSON: ${(err as Error).message}`);
  }
  const parsed = controlPlaneRecordSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: key "${issue.path.join('.')}": ${issue.message}`);
  }
  return parsed.data;
}

/** docs/control-plane.json under `root`, or undefined when there is none yet. */
export function readControlPlaneRecord(root: string): ControlPlaneRecord | undefined {
  const file = join(root, CONTROL_PLANE_FILE);
  if (!existsSync(file)) return undefined;
  return parseControlPlaneRecord(readFileSync(file, 'utf8'), file);
}

const seconds = (value: number): string => `${(value / 1000).toFixed(1)} s`;

/** The "On a real control plane" section of docs/performance.md. */
export function renderControlPlaneSection(r: ControlPlaneRecord): string {
  return `## On a real control plane

The e2e lane (\`npm run test:e2e\`, test/e2e/scaling.e2e.ts): a real kube-apiserver, the HPA
controller of kube-controller-manager and KEDA's operator and metrics apiserver
(Kubernetes ${r.versions.kubernetes}, etcd ${r.versions.etcd}, KEDA ${r.versions.keda}, built
from source by .ci/install-control-plane.sh) as processes on loopback; the chart installed by
\`helm install\`; the shim as a host process on the embedded engine. The lane asserts replica
counts; these times are what it saw on the way, from the change to the Deployment's
\`spec.replicas\` showing the new count (polled every 250 ms), and move with machine load.

- HPA sync period ${r.hpaSyncSeconds} s (\`--horizontal-pod-autoscaler-sync-period\`), KEDA
  \`pollingInterval\` ${r.pollingIntervalSeconds} s, the shim's StreamIsActive check every
  ${r.grpcCheckMs} ms, downscale stabilisation 0
- run: ${r.run}, ${r.machine}, load average at start ${r.loadAverage.atStart.toFixed(1)}, at end ${r.loadAverage.atEnd.toFixed(1)}
- command: \`DFE_E2E_WRITE_FIGURES=1 npm run test:e2e\` writes docs/control-plane.json;
  \`npm run docs:performance\` renders this page from it and docs/performance.json

| the runner's ScaledObject (chart), target 2 due hunts per runner | metrics-api | external-push |
|---|---|---|
| 5 due hunts at 0 replicas → 3 | ${seconds(r.metricsApi.zeroToThreeMs)} | ${seconds(r.externalPush.zeroToThreeMs)} |
| value change: 5 → 9 due, 3 → 5 replicas | ${seconds(r.metricsApi.valueChangeMs)} | ${seconds(r.externalPush.valueChangeMs)} |
| \`run-now\` at 0 replicas → 1 (from the CLI's return) | ${seconds(r.metricsApi.runNowMs)} | ${seconds(r.externalPush.runNowMs)} |

- pressure 100 against a target of 50 (a \`Value\` trigger from the pressure template): 1 → 6
  replicas in ${seconds(r.pressureScaleOutMs)}; a catalogue override reloaded while KEDA
  polls: 4 → 2 replicas in ${seconds(r.catalogueReloadMs)}
- the control plane: up in ${seconds(r.startMs)} (first spawn to the external metrics API
  answering through the aggregator); RSS of its five daemons ${r.rssMiB.atStart} MiB at start,
  ${r.rssMiB.atEnd} MiB at the end of the lane
`;
}
