/**
 * The promise on a real control plane: a real kube-apiserver, the HPA of a real
 * kube-controller-manager and KEDA's operator and metrics apiserver, built from source
 * (.ci/install-control-plane.sh), scale Deployments on what the shim answers. The shim runs as a
 * host process (the compiled CLI) on the embedded engine behind an HTTP front; each scenario has
 * its own database, its own fault front (the ClickHouse outage is real sockets: a refused port,
 * a black hole, a stalled body, garbage) and its own shim, so the scenarios run concurrently in
 * one control plane. Everything is asserted on the Deployments' `spec.replicas`, polled with
 * generous deadlines; the times seen are printed as figures, never asserted.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { quoteDatabase } from '../../src/clickhouse/identifiers.js';
import { dueCountSql } from '../../src/coordination/due-sql.js';
import { DEFAULT_SCHEMA_OPTIONS } from '../../src/coordination/tables.js';
import { applySchema } from '../../src/coordination/topology.js';
import { createOtelGaugeTable, insertGaugePoints } from '../../src/pressure/otel-table.js';
import { PRESSURE_METRIC } from '../../src/pressure/rule.js';
import { startEngineFront, type EngineFront } from '../../src/clickhouse/http-front.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { needs } from '../helpers/requirement.js';
import { runNode } from '../helpers/run-process.js';
import { CHART, REPO, missing, tools } from '../helpers/tools.js';
import { FIGURE, controlPlaneRecord, kubernetesVersion, writeControlPlaneRecord, writeFiguresRequested, type TriggerKind } from './figures.js';
import { applyStrict, kedaFieldObjects, refusal, waitForHpa, waitForScaledObjectCondition } from './keda-fields.js';
import { CONTROL_PLANE_BIN, controlPlaneMissing, startControlPlane, type ControlPlane, type KubeObject } from './control-plane.js';
import {
  bareEndpoint,
  deployment,
  faultFront,
  metricsApi,
  replicas,
  scaledObject,
  startShimProcess,
  waitForCondition,
  waitForReplicas,
  watchReplicas,
  type FaultFront,
  type FaultMode,
  type ShimProcess,
} from './world.js';

/** The HPA controller's sync period here (stated with every figure). */
const HPA_SYNC_SECONDS = 2;
/** The chart's ScaledObjects' pollingInterval, and the shims' StreamIsActive check interval (the product's default). */
const POLLING_INTERVAL_SECONDS = 2;
const GRPC_CHECK_MS = 1_000;
/** DFE_BACKLOG_REFRESH_SECONDS of the server-refreshed scenario: the server recounts the backlog every 2 s. */
const REFRESH_SECONDS = 2;
/** The ClickHouse outage: each fault in turn, 180 s in all (the promise is for outages of minutes). */
const OUTAGE: readonly { mode: FaultMode; seconds: number }[] = [
  { mode: 'killed', seconds: 45 },
  { mode: 'blackhole', seconds: 45 },
  { mode: 'stall', seconds: 45 },
  { mode: 'garbage', seconds: 45 },
];
const SCRIPT = join(REPO, 'scripts', 'keda-scale-test.sh');

const unmet = controlPlaneMissing() ?? missing('helm', 'openssl', 'crdsDir');
const figures: Record<string, unknown> = { hpaSyncSeconds: HPA_SYNC_SECONDS, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS };
const startedAt = new Date();
const loadAtStart = loadavg()[0] ?? 0;

needs(unmet).describe('KEDA and the HPA on a real control plane', () => {
  let cp: ControlPlane;
  let db: TestDatabase;
  let engine: EngineFront;
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    cp = await startControlPlane({ hpaSyncSeconds: HPA_SYNC_SECONDS });
    figures.controlPlaneStartMs = cp.startMs;
    figures.controlPlaneRssMiBAtStart = Math.round(cp.rssBytes() / 2 ** 20);
    figures.kubernetesVersion = await kubernetesVersion(cp);
    // prometheus-operator's CRDs (the vendored copies the chart tests use), for the monitoring objects.
    const monitoring = readdirSync(tools.crdsDir!).filter((f) => f.startsWith('monitoring.coreos.com_'));
    cp.kubectl(['apply', '--server-side', ...monitoring.flatMap((f) => ['-f', join(tools.crdsDir!, f)])]);
    cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
    db = await openTestDatabase('e2e');
    engine = await startEngineFront(db.handle);
  });

  afterAll(async () => {
    if (cp) figures.controlPlaneRssMiBAtEnd = Math.round(cp.rssBytes() / 2 ** 20);
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await engine?.close();
    await db?.close();
    await cp?.stop();
    console.log(`[e2e figures] ${JSON.stringify(figures)}`);
    mkdirSync(join(REPO, '.dfe'), { recursive: true });
    writeFileSync(join(REPO, '.dfe', 'e2e-figures.json'), `${JSON.stringify(figures, null, 2)}\n`);
    if (cp && writeFiguresRequested()) {
      const record = controlPlaneRecord(figures, cp.startMs, {
        startedAt,
        loadAtStart,
        hpaSyncSeconds: HPA_SYNC_SECONDS,
        pollingIntervalSeconds: POLLING_INTERVAL_SECONDS,
        grpcCheckMs: GRPC_CHECK_MS,
        rssMiBAtStart: figures.controlPlaneRssMiBAtStart as number,
        rssMiBAtEnd: figures.controlPlaneRssMiBAtEnd as number,
        kubernetesVersion: String(figures.kubernetesVersion),
      });
      console.log(`[e2e figures] wrote ${writeControlPlaneRecord(record)}; render docs/performance.md with npm run docs:performance`);
    }
  });

  /** One scenario's ClickHouse side: its database (schema + gauge table), its fault front, its shim. */
  interface Stack {
    readonly database: string;
    readonly front: FaultFront;
    readonly shim: ShimProcess;
    /** `count` due hunts `<prefix>-0…` (the operator script's SQL); `clear` tombstones them. */
    push(prefix: string, count: number): Promise<void>;
    clear(prefix: string, count: number): Promise<void>;
    /** Keeps `service`'s pressure at `value` (points every 3 s, the window is 60 s); `set` changes it, `stop` ends it. */
    pump(service: string, value: number): { set(value: number): void; stop(): void };
    /** A hunt in the schedule that is not due (its watermark covers the latest fire). */
    scheduleNotDue(huntId: string): Promise<void>;
    /** `dfe-hunt-runner run-now <hunt>`, the real CLI, through this stack's front. */
    runNow(huntId: string): Promise<void>;
  }

  const scriptSql = async (statement: string, database: string): Promise<string> => {
    const out = await run('bash', [SCRIPT, '--print-sql', statement], { PATH: process.env.PATH ?? '', DATA_DATABASE: database });
    if (out.code !== 0) throw new Error(`keda-scale-test.sh --print-sql ${statement}: ${out.stderr}`);
    return out.stdout;
  };

  /** `backlogRefreshSeconds`: the schema step makes the server-refreshed count and the shim reads it (docs/tables.md#the-server-refreshed-count). */
  async function stack(name: string, override?: string, backlogRefreshSeconds = 0): Promise<Stack> {
    const database = `${db.database}_${name}`;
    const client = db.handle.client;
    await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${quoteDatabase(database)}` });
    await applySchema(client, database, { kind: 'single' }, { ...DEFAULT_SCHEMA_OPTIONS, backlogRefreshSeconds });
    await createOtelGaugeTable(client, database);
    const front = await faultFront(engine.url);
    const shim = await startShimProcess({ clickhouseUrl: front.url, database, override, grpcCheckMs: GRPC_CHECK_MS, backlogRefreshSeconds });
    cleanups.push(async () => {
      await shim.stop();
      await front.close();
      await client.command({ query: `DROP DATABASE IF EXISTS ${quoteDatabase(database)}` });
    });
    const pushSql = await scriptSql('backlog-push', database);
    const clearSql = await scriptSql('backlog-clear', database);
    return {
      database,
      front,
      shim,
      push: (prefix, count) => client.command({ query: pushSql, query_params: { prefix, count } }).then(() => undefined),
      // Tombstones must be newer than the rows they replace (a DateTime64(3) version).
      clear: async (prefix, count) => {
        await new Promise((done) => setTimeout(done, 20));
        await client.command({ query: clearSql, query_params: { prefix, count } });
      },
      pump(service, value) {
        let current = value;
        const push = () => void insertGaugePoints(client, database, [gaugePoint(service, current)]).catch(() => undefined);
        push();
        const timer = setInterval(push, 3_000);
        cleanups.push(async () => clearInterval(timer));
        return {
          set: (next) => {
            current = next;
            push();
          },
          stop: () => clearInterval(timer),
        };
      },
      scheduleNotDue: async (huntId) => {
        const db = quoteDatabase(database);
        await client.command({ query: `INSERT INTO ${db}.hunt_schedule (hunt_id, interval_seconds, phase_offset, enabled) VALUES ({hunt:String}, 86400, 0, 1)`, query_params: { hunt: huntId } });
        await client.command({
          query: `INSERT INTO ${db}.hunt_watermark (hunt_id, watermark) SELECT {hunt:String}, intDiv(toUnixTimestamp(now()), 86400) * 86400`,
          query_params: { hunt: huntId },
        });
      },
      runNow: async (huntId) => {
        const out = await runNode([join(REPO, 'dist', 'src', 'cli', 'hunt-runner.js'), 'run-now', huntId], {
          PATH: process.env.PATH,
          LOG_LEVEL: 'warn',
          DFE_CLICKHOUSE_URL: front.url,
          DFE_CLICKHOUSE_DATA_DATABASE: database,
        });
        if (out.code !== 0) throw new Error(`dfe-hunt-runner run-now ${huntId}: ${out.stderr}${out.stdout}`);
      },
    };
  }

  const backlogValue = async (shim: ShimProcess): Promise<number> => ((await (await fetch(`${shim.url}/keda/hunt-backlog`)).json()) as { value: number }).value;

  /** A namespace, once its default ServiceAccount exists (pods are admitted only then). */
  async function namespace(name: string): Promise<void> {
    await cp.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    const deadline = Date.now() + 30_000;
    while ((await cp.api('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)).status !== 200) {
      if (Date.now() > deadline) throw new Error(`namespace ${name}: no default ServiceAccount in 30 s`);
      await new Promise((done) => setTimeout(done, 250));
    }
  }

  async function applyAll(objects: readonly KubeObject[]): Promise<void> {
    for (const object of objects) await cp.apply(object);
  }

  /** `helm install` of the chart (hooks left out: the materialise Job needs a kubelet; it is checked by a server-side dry run instead). */
  async function helmInstall(release: string, ns: string, values: object): Promise<{ scaledObjects: KubeObject[] }> {
    const valuesFile = join(cp.dir, `${release}-values.json`);
    writeFileSync(valuesFile, JSON.stringify(values));
    const helm = (args: string[]) => run(tools.helm!, [...args, '--kubeconfig', cp.kubeconfig], process.env);
    const install = await helm(['install', release, CHART, '--namespace', ns, '--create-namespace', '--no-hooks', '--values', valuesFile]);
    if (install.code !== 0) throw new Error(`helm install ${release}: ${install.stderr}${install.stdout}`);
    const manifest = await helm(['get', 'manifest', release, '--namespace', ns]);
    // Every object of the release is in the API server, as sent.
    cp.kubectl(['get', '--namespace', ns, '-f', '-', '-o', 'name'], manifest.stdout);
    const hooks = await helm(['get', 'hooks', release, '--namespace', ns]);
    if (hooks.stdout.trim() !== '') cp.kubectl(['create', '--namespace', ns, '--dry-run=server', '-f', '-'], hooks.stdout);
    const all = JSON.parse(cp.kubectl(['get', '--namespace', ns, '-f', '-', '-o', 'json'], manifest.stdout)) as { items?: KubeObject[] } & KubeObject;
    const items = all.items ?? [all];
    return { scaledObjects: items.filter((o) => o.kind === 'ScaledObject') };
  }

  const chartValues = (autoscaling: object, extra: object = {}) => ({
    monitoring: { monitor: { enabled: true }, rules: { enabled: true }, dashboard: { enabled: true } },
    huntRunner: {
      autoscaling: { enabled: true, minReplicaCount: 0, maxReplicaCount: 10, targetBacklog: 2, pollingInterval: POLLING_INTERVAL_SECONDS, cooldownPeriod: 5, ...autoscaling },
    },
    ...extra,
  });

  /** The backlog story of the chart's runner ScaledObject: N due → ceil(N/2); a change; drained → 0; run-now → 1. */
  /** `kind` names the figures the story records; a story without one records none. */
  async function backlogStory(s: Stack, ns: string, runner: string, kind: TriggerKind | undefined, expect: import('vitest').ExpectStatic): Promise<void> {
    const record = (figure: (k: TriggerKind) => string, ms: number) => {
      if (kind) figures[figure(kind)] = ms;
    };
    await waitForCondition(cp, `/apis/keda.sh/v1alpha1/namespaces/${ns}/scaledobjects/${runner}`, 'Ready');
    // KEDA made its HPA.
    await waitForCondition(cp, `/apis/autoscaling/v2/namespaces/${ns}/horizontalpodautoscalers/keda-hpa-${runner}`, 'AbleToScale');
    await waitForReplicas(cp, ns, runner, 0); // nothing due, minReplicaCount 0
    await s.push('due', 5);
    record(FIGURE.zeroToThree, await waitForReplicas(cp, ns, runner, 3));
    await s.push('more', 4);
    record(FIGURE.valueChange, await waitForReplicas(cp, ns, runner, 5));
    await s.clear('due', 5);
    await s.clear('more', 4);
    await waitForReplicas(cp, ns, runner, 0);
    expect(await backlogValue(s.shim)).toBe(0);
    await s.runNow('wake');
    record(FIGURE.runNow, await waitForReplicas(cp, ns, runner, 1));
  }

  describe.concurrent('scenarios (one control plane, concurrently)', () => {
    it('metrics-api: the chart installed for real; backlog → ceil(N/target), drained → 0, run-now wakes it; pressure out and in; CPU beside pressure blocks scale-in', async ({ expect }) => {
      const s = await stack('http');
      await s.scheduleNotDue('wake');
      const ns = 'dfe-http';
      const pressureApp = (name: string, cpu: boolean) => [
        JSON.stringify(deployment(ns, name, 1)),
        `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: ${name}
spec:
  scaleTargetRef: {name: ${name}}
  minReplicaCount: 1
  maxReplicaCount: 6
  pollingInterval: ${POLLING_INTERVAL_SECONDS}
  cooldownPeriod: 5
  triggers:
    {{- include "dfe-keda-shim.pressureTriggers" (dict "service" "${name}" "shimAddress" "${s.shim.url}" "target" 50 "cpu" ${cpu}) | nindent 4 }}
`,
      ];
      const { scaledObjects } = await helmInstall('http', ns, chartValues({ shimAddress: s.shim.url }, { extraManifests: [...pressureApp('app-pressure', false), ...pressureApp('app-cpu', true)] }));
      const runner = scaledObjects.find((o) => !o.metadata.name.startsWith('app-'))!.metadata.name;

      const pressure = (async () => {
        await waitForCondition(cp, `/apis/keda.sh/v1alpha1/namespaces/${ns}/scaledobjects/app-pressure`, 'Ready');
        const appPressure = s.pump('app-pressure', 100);
        const appCpu = s.pump('app-cpu', 100);
        figures[FIGURE.pressureOut] = await waitForReplicas(cp, ns, 'app-pressure', 6);
        // CPU has no metrics here (no metrics API): an invalid metric, yet pressure scaled it out.
        await waitForReplicas(cp, ns, 'app-cpu', 6);
        appPressure.set(10);
        appCpu.set(10);
        // The 100s leave the 60 s window; the average falls under the target: scale-in to 1.
        await waitForReplicas(cp, ns, 'app-pressure', 1, 180_000);
        // Beside an invalid CPU metric, the HPA does not scale down: app-cpu stays at 6.
        figures['pressure 10 with an invalid CPU metric beside it (app-cpu), replicas seen'] = await replicas(cp, ns, 'app-cpu');
        expect(await replicas(cp, ns, 'app-cpu')).toBe(6);
        appPressure.stop();
        appCpu.stop();
      })();
      await backlogStory(s, ns, runner, 'metrics-api', expect);
      await pressure;
    });

    it('external-push: the chart with keda.triggerType external-push; backlog, drained, run-now wakes it from zero', async ({ expect }) => {
      const s = await stack('push', undefined);
      await s.scheduleNotDue('wake');
      const ns = 'dfe-push';
      const { scaledObjects } = await helmInstall('push', ns, chartValues({ scalerAddress: s.shim.scalerAddress }, { keda: { triggerType: 'external-push' } }));
      expect(scaledObjects).toHaveLength(1);
      await backlogStory(s, ns, scaledObjects[0]!.metadata.name, 'external-push', expect);
    });

    it('metrics-api with backlog.refreshSeconds: the server-refreshed count drives KEDA; backlog → ceil(N/target), drained → 0, run-now wakes it', async ({ expect }) => {
      const s = await stack('refreshed', undefined, REFRESH_SECONDS);
      await s.scheduleNotDue('wake');
      const ns = 'dfe-refreshed';
      const { scaledObjects } = await helmInstall('refreshed', ns, chartValues({ shimAddress: s.shim.url }, { backlog: { refreshSeconds: REFRESH_SECONDS } }));
      expect(scaledObjects).toHaveLength(1);
      await backlogStory(s, ns, scaledObjects[0]!.metadata.name, undefined, expect);
      // The answers came from the server's counts: the view appended one every period, and the
      // newest (the run-now request's 1) is what the shim answers.
      const [appended] = await queryRows<{ n: number | string; newest: number | string }>(
        db,
        `SELECT count() AS n, argMax(value, computed_at) AS newest FROM ${quoteDatabase(s.database)}.hunt_backlog`,
      );
      expect(Number(appended?.n)).toBeGreaterThan(1);
      expect(Number(appended?.newest)).toBe(await backlogValue(s.shim));
    });

    it('a ClickHouse outage of 3 minutes (killed, black hole, stall, garbage; the shim restarted mid-outage): shim-fed replicas hold, and follow again after; a bare endpoint side by side', async ({ expect }) => {
      const s = await stack('outage');
      const ns = 'outage';
      await namespace(ns);
      const bare = await bareEndpoint(s.front.url, dueCountSql(s.database), 'error');
      const bareZero = await bareEndpoint(s.front.url, dueCountSql(s.database), 'zero');
      cleanups.push(() => bare.close());
      cleanups.push(() => bareZero.close());
      const fallback: Record<string, unknown> = { failureThreshold: 3, replicas: 1, behavior: 'static' };
      const backlogUrl = `${s.shim.url}/keda/hunt-backlog`;
      const subjects: { name: string; via: 'shim' | 'bare'; min: number; triggers: Record<string, unknown>[]; fallback?: Record<string, unknown>; start?: number }[] = [
        { name: 'shim-http', via: 'shim', min: 0, triggers: [metricsApi('backlog', backlogUrl, 'AverageValue', 2)] },
        { name: 'shim-push', via: 'shim', min: 0, triggers: [{ type: 'external-push', name: 'backlog', metricType: 'AverageValue', metadata: { scalerAddress: s.shim.scalerAddress, query: 'backlog', targetValue: '2' } }] },
        { name: 'shim-pressure', via: 'shim', min: 1, start: 3, triggers: [metricsApi('pressure', `${s.shim.url}/keda/pressure?service=svc&hold=50`, 'Value', 50)] },
        { name: 'shim-fallback', via: 'shim', min: 1, fallback, triggers: [metricsApi('backlog', backlogUrl, 'AverageValue', 2)] },
        { name: 'bare-500', via: 'bare', min: 1, triggers: [metricsApi('backlog', bare.url, 'AverageValue', 2)] },
        { name: 'bare-fallback', via: 'bare', min: 1, fallback, triggers: [metricsApi('backlog', bare.url, 'AverageValue', 2)] },
        { name: 'bare-zero', via: 'bare', min: 0, triggers: [metricsApi('backlog', bareZero.url, 'AverageValue', 2)] },
      ];
      await s.push('due', 6);
      // At the target: the Value trigger keeps the count it starts with (3).
      const svc = s.pump('svc', 50);
      for (const subject of subjects) {
        await applyAll([
          deployment(ns, subject.name, subject.start ?? 1),
          scaledObject(ns, subject.name, { min: subject.min, max: 10, triggers: subject.triggers, ...(subject.fallback ? { fallback: subject.fallback } : {}) }),
        ]);
      }
      await Promise.all(subjects.map((subject) => waitForReplicas(cp, ns, subject.name, 3)));
      // A second replica that has answered the same keys: the restarted shim's peer.
      const peer = await startShimProcess({ clickhouseUrl: s.front.url, database: s.database, grpcCheckMs: GRPC_CHECK_MS });
      cleanups.push(() => peer.stop());
      // Pressure asks with `hold`, which answers by itself: the backlog is the key a peer must fill.
      const keys = ['/keda/hunt-backlog'];
      const answer = async (base: string, key: string) => (await (await fetch(`${base}${key}`)).json()) as { value: number; source: string };
      const before = await Promise.all(keys.map((key) => answer(peer.url, key)));
      expect(before.map((a) => a.source)).toEqual(['fresh']);

      // The outage: every subject watched throughout, the faults in turn, the shim restarted (SIGKILL) in the middle.
      const total = OUTAGE.reduce((sum, phase) => sum + phase.seconds, 0) * 1000;
      const watching = Promise.all(subjects.map((subject) => watchReplicas(cp, ns, subject.name, total)));
      for (const [i, phase] of OUTAGE.entries()) {
        await s.front.set(phase.mode);
        // Restarted as a new pod would be: no snapshot, its peer named; it answers from the peer.
        if (i === 1) {
          await s.shim.restart({ loseSnapshot: true, peers: peer.url });
          const after = await Promise.all(keys.map((key) => answer(s.shim.url, key)));
          figures['outage: the restarted shim, no snapshot, asks its peer'] = after;
          expect(after).toEqual(before.map((a) => ({ ...a, source: 'last_good', age_seconds: expect.any(Number) })));
        }
        await new Promise((done) => setTimeout(done, phase.seconds * 1000));
      }
      const sequences = await watching;
      const during = Object.fromEntries(subjects.map((subject, i) => [subject.name, sequences[i]]));
      figures['outage 180 s: spec.replicas seen (shim vs bare)'] = during;

      // Fresh values ready before ClickHouse comes back: 10 due (→ 5), pressure 100 (→ out).
      await s.push('more', 4);
      svc.set(100);
      await s.front.set('up');
      const after = await Promise.all(
        subjects.map(async (subject) => [subject.name, await waitForReplicas(cp, ns, subject.name, subject.name === 'shim-pressure' ? 10 : 5, 180_000)] as const),
      );
      figures['after the outage: ms to follow the new value'] = Object.fromEntries(after);

      // What the shim promises: nothing moved, for either signal and both trigger kinds.
      expect(during['shim-http']).toEqual([3]);
      expect(during['shim-push']).toEqual([3]);
      expect(during['shim-pressure']).toEqual([3]);
      expect(during['shim-fallback']).toEqual([3]);
      // What a bare endpoint gets: a single-metric HPA holds on errors by itself; KEDA's fallback
      // moves the count to its fallback replicas; an unreadable answer read as 0 scales to zero.
      expect(during['bare-500']).toEqual([3]);
      expect(during['bare-fallback']).toContain(1);
      expect(during['bare-zero']).toContain(0);
    });

    it('a catalogue override reload while KEDA polls: replicas go from the old value to the new, nothing between', async ({ expect }) => {
      const s = await stack('reload', 'queries:\n  level:\n    sql: "SELECT 4 AS value"\n');
      const ns = 'reload';
      await namespace(ns);
      await applyAll([deployment(ns, 'level'), scaledObject(ns, 'level', { min: 1, max: 10, triggers: [metricsApi('level', `${s.shim.url}/q/level`, 'AverageValue', 1)] })]);
      await waitForReplicas(cp, ns, 'level', 4);
      const watching = watchReplicas(cp, ns, 'level', 30_000);
      // As a ConfigMap update lands: a new file renamed over the old one.
      const next = `${s.shim.overridePath}.next`;
      writeFileSync(next, 'queries:\n  level:\n    sql: "SELECT 2 AS value"\n');
      renameSync(next, s.shim.overridePath);
      figures[FIGURE.reload] = await waitForReplicas(cp, ns, 'level', 2);
      expect(await watching).toEqual([4, 2]);
      const metrics = await (await fetch(`${s.shim.url}/metrics`)).text();
      expect(metrics).toMatch(/catalogue_reloads_total\{[^}]*result="applied"[^}]*\} [1-9]/);
    });

    it("issue 28's KEDA 2.17–2.20 fields, every one on: the apiserver accepts the chart's ScaledObjects (strict schema), KEDA pauses on the annotations and makes the formula's HPA; invalid objects are refused", async ({ expect }) => {
      const ns = 'keda-fields';
      await namespace(ns);
      const { runner, runnerLive, app } = kedaFieldObjects(ns);
      const target = runner.spec.scaleTargetRef.name as string;
      // Accepted as rendered, every field known to KEDA 2.20's CRD (an unknown one would fail --validate=strict).
      const accepted = applyStrict(cp, [runner, app], true);
      expect(accepted).toContain(`scaledobject.keda.sh/${runner.metadata.name} serverside-applied (server dry run)`);
      expect(accepted).toContain('scaledobject.keda.sh/dfe-loader serverside-applied (server dry run)');

      // For real: the pause annotations hold the target at paused-replicas; KEDA says Paused.
      await applyAll([deployment(ns, target, 1), deployment(ns, 'dfe-loader', 1)]);
      applyStrict(cp, [runner]);
      await waitForScaledObjectCondition(cp, ns, runner.metadata.name, 'Paused', 'True');
      await waitForReplicas(cp, ns, target, 2);
      // Unpaused: KEDA makes its HPA under horizontalPodAutoscalerConfig.name, one composite metric for the formula, the behavior as set.
      applyStrict(cp, [runnerLive]);
      const runnerHpa = await waitForHpa(cp, ns, 'dfe-runner-hpa');
      expect(runnerHpa.spec.metrics).toEqual([
        expect.objectContaining({ type: 'External', external: expect.objectContaining({ metric: expect.objectContaining({ name: 'composite-metric' }), target: { type: 'AverageValue', averageValue: '10' } }) }),
      ]);
      expect(runnerHpa.spec.behavior?.scaleDown?.stabilizationWindowSeconds).toBe(600);
      // The app: its formula's composite metric, the template's CPU trigger kept beside it.
      applyStrict(cp, [app]);
      const appHpa = await waitForHpa(cp, ns, 'keda-hpa-dfe-loader');
      expect(appHpa.spec.metrics?.map((m) => m.external?.metric.name ?? `resource:${m.resource?.name ?? ''}`).sort()).toEqual(['composite-metric', 'resource:cpu']);
      expect(appHpa.spec.metrics?.find((m) => m.type === 'External')?.external?.target).toEqual({ type: 'Value', value: '70' });

      // The check can fail. The apiserver refuses a field the CRD does not know, and the CRD's own rule (min ≤ max):
      expect(refusal(cp, [{ ...app, spec: { ...app.spec, advanced: { ...app.spec.advanced, scalingModifier: { formula: 'pressure' } } } }])).toMatch(/\.spec\.advanced\.scalingModifier: field not declared in schema/);
      expect(refusal(cp, [{ ...app, spec: { ...app.spec, minReplicaCount: 11 } }])).toContain('minReplicaCount must be less than or equal to maxReplicaCount');
      // A ScaledObject name over 63 characters: KEDA's check is in its admission webhook, which this
      // lane does not run, so the apiserver stores it; KEDA's operator then cannot reconcile it.
      const long = { ...runnerLive, metadata: { ...runnerLive.metadata, name: 'r'.repeat(64) } };
      applyStrict(cp, [long]);
      const refused = await waitForScaledObjectCondition(cp, ns, long.metadata.name, 'Ready', 'False');
      expect(refused.message).toMatch(/failed to update ScaledObject with scaledObjectName label: .* must be no more than 63/);
      // A formula naming the CPU trigger (KEDA keeps cpu and memory out of formulas): the operator refuses it too.
      const cpuFormula = { ...app, metadata: { ...app.metadata, name: 'cpu-formula' }, spec: { ...app.spec, scaleTargetRef: { name: 'dfe-loader-2' }, advanced: { scalingModifiers: { ...app.spec.advanced.scalingModifiers, formula: 'max(pressure, cpu_load)' } } } };
      await applyAll([deployment(ns, 'dfe-loader-2', 1)]);
      applyStrict(cp, [cpuFormula]);
      const formulaRefused = await waitForScaledObjectCondition(cp, ns, 'cpu-formula', 'Ready', 'False');
      expect(formulaRefused.message).toMatch(/error validating formula in ScalingModifiers\s+unknown name cpu_load/);
    });

    it('scripts/keda-scale-test.sh, the operator\'s proof, reports PASS for both paths on this control plane', async ({ expect }) => {
      const s = await stack('script');
      const ns = 'scale-test';
      await namespace(ns);
      const out = await run('bash', [SCRIPT], {
        PATH: `${CONTROL_PLANE_BIN}:${process.env.PATH ?? ''}`,
        HOME: process.env.HOME ?? '/tmp',
        KUBECONFIG: cp.kubeconfig,
        SHIM_URL: s.shim.url,
        SHIM_NAMESPACE: ns,
        TEST_NAMESPACE: ns,
        CLICKHOUSE_URL: engine.url,
        DATA_DATABASE: s.database,
        RUN_ID: 'e2e',
      });
      figures['keda-scale-test.sh output (tail)'] = out.stdout.split('\n').slice(-4).join(' | ');
      expect(out.code, `${out.stdout}\n${out.stderr}`).toBe(0);
      expect(out.stdout).toMatch(/pressure: PASS/);
      expect(out.stdout).toMatch(/backlog: PASS/);
    });
  });
});

function gaugePoint(service: string, value: number) {
  return {
    serviceName: service,
    metricName: PRESSURE_METRIC,
    value,
    timeUnixNs: BigInt(Date.now()) * 1_000_000n,
    resourceAttributes: { 'service.name': service, 'service.instance.id': `${service}-pod` },
  };
}

/** A child process to completion, without blocking this process (the engine front answers from here). */
function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
