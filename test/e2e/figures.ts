import { realpathSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { CONTROL_PLANE_FILE, controlPlaneRecordSchema, type ControlPlaneRecord } from '../../bench/control-plane-doc.js';
import { REPO } from '../helpers/tools.js';
import { CONTROL_PLANE_BIN, type ControlPlane } from './control-plane.js';

/**
 * The lane's figures: every run prints them and writes .dfe/e2e-figures.json; with
 * `DFE_E2E_WRITE_FIGURES=1` a run whose figures are complete also writes docs/control-plane.json,
 * which docs/performance.md renders (bench/control-plane-doc.ts, `npm run docs:performance`).
 */

export type TriggerKind = 'metrics-api' | 'external-push';

/** The names of the figures in .dfe/e2e-figures.json that the record reads. */
export const FIGURE = {
  zeroToThree: (kind: TriggerKind) => `${kind}: 0 → 3 (5 due), ms`,
  valueChange: (kind: TriggerKind) => `${kind}: value change 3 → 5 (9 due), ms`,
  runNow: (kind: TriggerKind) => `${kind}: run-now → 0 → 1, ms`,
  pressureOut: 'pressure 100 (target 50): 1 → 6, ms',
  reload: 'catalogue reload 4 → 2, ms',
} as const;

export const writeFiguresRequested = (): boolean => process.env.DFE_E2E_WRITE_FIGURES === '1';

export interface RunContext {
  readonly startedAt: Date;
  readonly loadAtStart: number;
  readonly hpaSyncSeconds: number;
  readonly pollingIntervalSeconds: number;
  readonly grpcCheckMs: number;
  readonly rssMiBAtStart: number;
  readonly rssMiBAtEnd: number;
  readonly kubernetesVersion: string;
}

/** etcd's and KEDA's versions from the installer's directory name (k8s-<v>.etcd-<v>.keda-<v>; `current` links to it). */
function installedVersions(): { etcd: string; keda: string } {
  const name = basename(realpathSync(resolve(CONTROL_PLANE_BIN, '..')));
  const found = /etcd-(v[\d.]+)\.keda-(v[\d.]+)$/.exec(name);
  return { etcd: found?.[1] ?? `unknown (${name})`, keda: found?.[2] ?? `unknown (${name})` };
}

/** The apiserver's own version (`/version`). */
export async function kubernetesVersion(cp: ControlPlane): Promise<string> {
  const res = await cp.api('GET', '/version');
  return res.status === 200 ? res.json<{ gitVersion: string }>().gitVersion : `unknown (HTTP ${res.status})`;
}

/** The record of one run; throws naming the figure that is missing (a scenario that failed). */
export function controlPlaneRecord(figures: Record<string, unknown>, startMs: number, context: RunContext): ControlPlaneRecord {
  const ms = (key: string): unknown => figures[key];
  const trigger = (kind: TriggerKind) => ({ zeroToThreeMs: ms(FIGURE.zeroToThree(kind)), valueChangeMs: ms(FIGURE.valueChange(kind)), runNowMs: ms(FIGURE.runNow(kind)) });
  const cpu = cpus();
  const parsed = controlPlaneRecordSchema.safeParse({
    run: context.startedAt.toISOString(),
    machine: `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
    loadAverage: { atStart: Number(context.loadAtStart.toFixed(1)), atEnd: Number((loadavg()[0] ?? 0).toFixed(1)) },
    versions: { kubernetes: context.kubernetesVersion, ...installedVersions() },
    hpaSyncSeconds: context.hpaSyncSeconds,
    pollingIntervalSeconds: context.pollingIntervalSeconds,
    grpcCheckMs: context.grpcCheckMs,
    startMs,
    rssMiB: { atStart: context.rssMiBAtStart, atEnd: context.rssMiBAtEnd },
    metricsApi: trigger('metrics-api'),
    externalPush: trigger('external-push'),
    pressureScaleOutMs: ms(FIGURE.pressureOut),
    catalogueReloadMs: ms(FIGURE.reload),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${CONTROL_PLANE_FILE} not written: "${issue.path.join('.')}" ${issue.message} (did every scenario pass?)`);
  }
  return parsed.data;
}

export function writeControlPlaneRecord(record: ControlPlaneRecord): string {
  const file = join(REPO, CONTROL_PLANE_FILE);
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
  return file;
}
