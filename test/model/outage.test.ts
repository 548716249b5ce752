import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KedaHpaModel, type ModelStep } from '../helpers/keda-model.js';
import { kedaFetch, openWorld, type ShimAnswer, type World } from './world.js';

/**
 * docs/failsafe.md#metric_type-value-and-hold end to end: the KEDA/HPA model polls the REAL shim over HTTP,
 * the shim queries the real engine, and then ClickHouse becomes unreachable
 * (a refusing port, then one that never answers).
 *
 * Pressure is closed-loop: a service's load spreads over its pods, so each pod
 * reports load / replicas and the `Value` trigger (target 70) settles where the
 * pods sit at 70. Right before the outage the load jumps, so the last good
 * value (100) is above target.
 */
const TARGET = 70;
const MAX = 10;
let world: World;

beforeAll(async () => {
  world = await openWorld();
});
afterAll(async () => world?.close());

const hpaSteps = (m: KedaHpaModel, from: number, to: number): ModelStep[] =>
  m.steps.filter((s) => s.loop === 'hpa' && s.atSeconds > from && s.atSeconds <= to);
const answersIn = (answers: ShimAnswer[], from: number, to: number) => answers.filter((a) => a.atSeconds > from && a.atSeconds <= to);

/** A pressure run: returns the model and every answer the shim gave. */
function pressureRun(service: string, query: string) {
  const answers: ShimAnswer[] = [];
  let load = 280;
  let published = '';
  const model: KedaHpaModel = new KedaHpaModel(
    { metricType: 'Value', target: TARGET, minReplicaCount: 1, maxReplicaCount: MAX, initialReplicas: 2 },
    kedaFetch(`${world.shimUrl}/keda/pressure?${query}`, world.clock, answers, async () => {
      const state = `${load}/${model.replicas}`;
      if (world.network.link !== 'up' || state === published) return;
      await world.publishPressure(service, load, model.replicas);
      published = state;
    }),
  );
  return { model, answers, setLoad: (l: number) => (load = l) };
}

describe('KEDA + HPA over the real shim through a ClickHouse outage', () => {
  it('Value with hold=70: the replica count stays put while ClickHouse is down', async () => {
    world.network.link = 'up';
    const { model, answers, setLoad } = pressureRun('checkout', `service=checkout&hold=${TARGET}`);
    await model.runUntil(120);
    expect(model.replicas).toBe(4); // 280 / 4 pods = 70 = target
    expect(answersIn(answers, 60, 120).every((a) => a.source === 'fresh' && a.value === 70)).toBe(true);

    setLoad(420);
    await model.runUntil(135);
    expect(model.replicas).toBe(6); // saw 100 at 4 pods: ceil(4 × 100 / 70)

    world.network.link = 'refused';
    await model.runUntil(300);
    const holeHitsBefore = world.blackHoleHits();
    world.network.link = 'black-hole';
    await model.runUntil(315);
    expect(world.blackHoleHits()).toBeGreaterThan(holeHitsBefore);
    const outage = answersIn(answers, 135, 315);
    expect(outage.length).toBeGreaterThan(15);
    expect(outage.every((a) => a.status === 200 && a.source === 'hold' && a.value === TARGET)).toBe(true);
    expect(hpaSteps(model, 135, 315).every((s) => s.replicasAfter === 6)).toBe(true);

    world.network.link = 'up';
    await model.runUntil(480);
    expect(answersIn(answers, 420, 480).every((a) => a.source === 'fresh' && a.value === 70)).toBe(true);
    expect(Math.max(...model.steps.filter((s) => s.atSeconds >= 135).map((s) => s.replicasAfter))).toBe(6);
    expect(model.replicas).toBe(6); // 420 / 6 = 70: right for the new load
  });

  it('Value WITHOUT hold: a last-good value above target keeps scaling out to max', async () => {
    world.network.link = 'up';
    const { model, answers, setLoad } = pressureRun('cart', 'service=cart');
    await model.runUntil(120);
    expect(model.replicas).toBe(4);
    setLoad(420);
    await model.runUntil(135);
    expect(model.replicas).toBe(6);

    world.network.link = 'refused';
    await model.runUntil(300);
    const outage = answersIn(answers, 135, 300);
    expect(outage.every((a) => a.status === 200 && a.source === 'last_good' && a.value === 100)).toBe(true);
    const counts = hpaSteps(model, 135, 300).map((s) => s.replicasAfter);
    // ceil(6 × 100/70) = 9, ceil(9 × 100/70) = 13 → max: the frozen value compounds every sync.
    expect(counts.slice(0, 3)).toEqual([9, 10, 10]);
    expect(counts.every((n) => n === MAX || n === 9)).toBe(true);
    expect(model.replicas).toBe(MAX);

    // Back up: 420 over 10 pods reads 42, but scale-down stabilisation holds
    // the over-scaled count for another 300 s before it returns to 6.
    world.network.link = 'up';
    await model.runUntil(585);
    expect(model.replicas).toBe(MAX);
    await model.runUntil(600);
    expect(model.replicas).toBe(6);
  });

  it('AverageValue backlog: the last good value freezes the count, and KEDA never sees an error', async () => {
    world.network.link = 'up';
    const answers: ShimAnswer[] = [];
    const model = new KedaHpaModel(
      { metricType: 'AverageValue', target: 2, minReplicaCount: 1, maxReplicaCount: MAX, initialReplicas: 1 },
      kedaFetch(`${world.shimUrl}/keda/hunt-backlog`, world.clock, answers),
    );
    await world.setBacklog(8);
    await model.runUntil(120);
    expect(model.replicas).toBe(4);
    await world.setBacklog(12);
    await model.runUntil(135);
    expect(model.replicas).toBe(6);

    world.network.link = 'refused';
    await model.runUntil(450);
    const outage = answersIn(answers, 135, 450);
    expect(outage.every((a) => a.status === 200 && a.source === 'last_good' && a.value === 12)).toBe(true);
    expect(hpaSteps(model, 135, 450).every((s) => s.replicasAfter === 6)).toBe(true);
    // One request per poll: the shim hid the outage from KEDA (no retries, no fallback).
    expect(model.requests).toBe(model.steps.length);

    world.network.link = 'up';
    await model.runUntil(510);
    expect(answersIn(answers, 450, 510).every((a) => a.source === 'fresh' && a.value === 12)).toBe(true);
    expect(model.replicas).toBe(6);
  });
});
