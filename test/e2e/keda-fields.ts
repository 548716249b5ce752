import { ALL_ON, PRESSURE_ALL_ON, pressureAppChart } from '../helpers/keda-fields.js';
import { byKind, helmTemplate, type Manifest } from '../helpers/tools.js';
import type { ControlPlane } from './control-plane.js';

/**
 * Issue 28 part 3 on the real control plane: the ScaledObjects the chart renders with every
 * KEDA 2.17–2.20 field on (the value set of test/chart/keda-fields.test.ts, from
 * test/helpers/keda-fields.ts), applied to the e2e lane's apiserver, where KEDA's CRDs are
 * installed and KEDA's operator reconciles them. There is no admission webhook here: the
 * apiserver checks the CRD's schema (strict field validation: an unknown field is an error,
 * not silently pruned) and its CEL rules; KEDA's operator checks the rest when it reconciles.
 */

export interface KedaFieldObjects {
  /** The runner's ScaledObject exactly as ALL_ON renders it (paused by its annotations). */
  readonly runner: Manifest;
  /** The same with the pause annotations off and the trigger on a loopback port, so KEDA makes its HPA. */
  readonly runnerLive: Manifest;
  /** The app's ScaledObject from the pressure trigger template, with its formula. */
  readonly app: Manifest;
}

const scaledObjectOf = (manifests: Manifest[], namespace: string): Manifest => {
  const found = byKind(manifests, 'ScaledObject');
  if (found.length !== 1) throw new Error(`expected one ScaledObject, the chart rendered ${found.length}`);
  return { ...found[0]!, metadata: { ...found[0]!.metadata, namespace } };
};

export function kedaFieldObjects(namespace: string): KedaFieldObjects {
  const args = ['--namespace', namespace];
  const runner = scaledObjectOf(helmTemplate(ALL_ON, undefined, args).manifests, namespace);
  const autoscaling = ALL_ON.huntRunner.autoscaling;
  const live = {
    ...ALL_ON,
    huntRunner: { autoscaling: { ...autoscaling, paused: false, pausedReplicas: undefined, pausedScaleIn: false, pausedScaleOut: false, shimAddress: 'http://127.0.0.1:9' } },
  };
  const runnerLive = scaledObjectOf(helmTemplate(live, undefined, args).manifests, namespace);
  const chart = pressureAppChart();
  try {
    const app = scaledObjectOf(helmTemplate({ pressure: PRESSURE_ALL_ON }, chart.dir, args).manifests, namespace);
    return { runner, runnerLive, app };
  } finally {
    chart.remove();
  }
}

/** `kubectl apply --server-side --validate=strict` (a server dry run when `dryRun`): kubectl's output, or the apiserver's refusal as the error. */
export function applyStrict(cp: ControlPlane, objects: readonly Manifest[], dryRun = false): string {
  const input = objects.map((o) => JSON.stringify(o)).join('\n');
  return cp.kubectl(['apply', '--server-side', '--field-manager=dfe-e2e', '--force-conflicts', '--validate=strict', ...(dryRun ? ['--dry-run=server'] : []), '-f', '-'], input);
}

/** The apiserver's refusal of `objects` (throws when it accepted them). */
export function refusal(cp: ControlPlane, objects: readonly Manifest[]): string {
  try {
    applyStrict(cp, objects, true);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`the apiserver accepted ${objects.map((o) => o.metadata.name).join(', ')}`);
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** Polls a ScaledObject until its condition `type` has `status`; resolves with that condition. */
export async function waitForScaledObjectCondition(cp: ControlPlane, namespace: string, name: string, type: string, status: 'True' | 'False', timeoutMs = 60_000): Promise<Condition> {
  const path = `/apis/keda.sh/v1alpha1/namespaces/${namespace}/scaledobjects/${name}`;
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const res = await cp.api('GET', path);
    last = res.body;
    if (res.status === 200) {
      const found = (res.json<{ status?: { conditions?: Condition[] } }>().status?.conditions ?? []).find((c) => c.type === type);
      if (found?.status === status) return found;
    }
    if (Date.now() > deadline) throw new Error(`${namespace}/${name}: condition ${type} not ${status} within ${timeoutMs} ms: ${last.slice(0, 1500)}`);
    await new Promise((done) => setTimeout(done, 250));
  }
}

export interface HpaSpec {
  metadata: { name: string };
  spec: {
    behavior?: { scaleDown?: { stabilizationWindowSeconds?: number } };
    metrics?: { type: string; external?: { metric: { name: string }; target: { type: string; value?: string; averageValue?: string } }; resource?: { name: string } }[];
  };
}

/** Polls until the HPA `name` exists; resolves with it. */
export async function waitForHpa(cp: ControlPlane, namespace: string, name: string, timeoutMs = 60_000): Promise<HpaSpec> {
  const path = `/apis/autoscaling/v2/namespaces/${namespace}/horizontalpodautoscalers/${name}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await cp.api('GET', path);
    if (res.status === 200) return res.json<HpaSpec>();
    if (Date.now() > deadline) {
      const so = await cp.api('GET', `/apis/keda.sh/v1alpha1/namespaces/${namespace}/scaledobjects`);
      throw new Error(`HPA ${namespace}/${name} not made within ${timeoutMs} ms; ScaledObjects: ${so.body.slice(0, 3000)}`);
    }
    await new Promise((done) => setTimeout(done, 250));
  }
}
