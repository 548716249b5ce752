import { describe, expect, it } from 'vitest';
import {
  fallbackDesired,
  hpaRawDesired,
  KedaHpaModel,
  readMetricsApi,
  type FetchMetric,
  type MetricReading,
  type ModelOptions,
} from '../helpers/keda-model.js';

const value = (v: number): MetricReading => ({ kind: 'value', value: v });
const failing: FetchMetric = async () => ({ kind: 'error', reason: 'HTTP 503' });
const constant = (v: number): FetchMetric => async () => value(v);
/** A metric that follows a script of (fromSeconds, value) steps. */
const scripted =
  (script: readonly (readonly [number, number | 'error'])[]): FetchMetric =>
  async (t) => {
    const current = [...script].reverse().find(([from]) => t >= from)?.[1] ?? 0;
    return current === 'error' ? { kind: 'error', reason: 'HTTP 503' } : value(current);
  };

const model = (options: Partial<ModelOptions>, fetch: FetchMetric) =>
  new KedaHpaModel({ metricType: 'AverageValue', target: 10, initialReplicas: 1, minReplicaCount: 1, maxReplicaCount: 20, ...options }, fetch);

describe('readMetricsApi', () => {
  it('reads a 200 JSON number at valueLocation', () => {
    expect(readMetricsApi(200, '{"value": 42.5, "source": "fresh"}')).toEqual(value(42.5));
  });
  it('treats every non-200 as an error', () => {
    for (const status of [204, 302, 400, 404, 500, 503]) expect(readMetricsApi(status, '{"value": 1}').kind).toBe('error');
  });
  it('rejects null, booleans, objects, a missing key and non-JSON bodies', () => {
    for (const body of ['{"value": null}', '{"value": true}', '{"value": {}}', '{}', 'nope', '[]']) {
      expect(readMetricsApi(200, body).kind).toBe('error');
    }
  });
  it('parses quantity strings, turns negatives into 0 and keeps milli-units', () => {
    expect(readMetricsApi(200, '{"value": "10m"}')).toEqual(value(0.01));
    expect(readMetricsApi(200, '{"value": "7"}')).toEqual(value(7));
    expect(readMetricsApi(200, '{"value": -3}')).toEqual(value(0));
    expect(readMetricsApi(200, '{"value": 1.23456}')).toEqual(value(1.235));
  });
});

describe('hpaRawDesired', () => {
  it('AverageValue: ceil(value / target), independent of the current count', () => {
    expect(hpaRawDesired('AverageValue', 10, 1, 25)).toBe(3);
    expect(hpaRawDesired('AverageValue', 10, 7, 25)).toBe(3);
    expect(hpaRawDesired('AverageValue', 10, 3, 0)).toBe(0);
  });
  it('Value: ceil(current × value / target)', () => {
    expect(hpaRawDesired('Value', 70, 4, 140)).toBe(8);
    expect(hpaRawDesired('Value', 70, 4, 35)).toBe(2);
    expect(hpaRawDesired('Value', 70, 4, 70)).toBe(4);
  });
  it('keeps the count within the 10 % tolerance', () => {
    // 77/70 is 1.1 only on paper: in float64 it is just above, so the HPA (same
    // float64 arithmetic) scales at 77. The band is exclusive in practice.
    expect(hpaRawDesired('Value', 70, 4, 76.9)).toBe(4);
    expect(hpaRawDesired('Value', 70, 4, 63.1)).toBe(4);
    expect(hpaRawDesired('Value', 70, 4, 78)).toBe(5);
    expect(hpaRawDesired('AverageValue', 10, 3, 32)).toBe(3);
    expect(hpaRawDesired('AverageValue', 10, 3, 34)).toBe(4);
  });
  it('fallback behaviours', () => {
    expect(fallbackDesired('static', 7, 3)).toBe(3);
    expect(fallbackDesired('currentReplicas', 7, 3)).toBe(7);
    expect(fallbackDesired('currentReplicasIfHigher', 7, 3)).toBe(7);
    expect(fallbackDesired('currentReplicasIfLower', 7, 3)).toBe(3);
  });
});

describe('KedaHpaModel: polling load', () => {
  it('one request per pollingInterval plus one per HPA sync while replicas ≥ 1', async () => {
    const m = model({ pollingIntervalSeconds: 30 }, constant(10));
    await m.runUntil(299);
    expect(m.requests).toBe(10 + 20);
  });
  it('two requests per failed poll', async () => {
    const m = model({ pollingIntervalSeconds: 30 }, failing);
    await m.runUntil(299);
    expect(m.requests).toBe(2 * (10 + 20));
    expect(m.replicas).toBe(1);
  });
  it('at zero replicas only the operator loop polls', async () => {
    const m = model({ minReplicaCount: 0, initialReplicas: 0 }, constant(0));
    await m.runUntil(299);
    expect(m.requests).toBe(10);
    expect(m.replicas).toBe(0);
  });
});

describe('KedaHpaModel: scaling', () => {
  it('scale-up is limited to max(+100 %, +4) per 15 s, then capped at max', async () => {
    const m = model({ target: 1, maxReplicaCount: 30 }, constant(1000));
    const seen: number[] = [];
    for (let t = 0; t <= 75; t += 15) {
      await m.runUntil(t);
      seen.push(m.replicas);
    }
    expect(seen).toEqual([5, 10, 20, 30, 30, 30]);
  });

  it('scale-down waits for the highest recommendation of the last 300 s to leave the window', async () => {
    const m = model({ initialReplicas: 10 }, scripted([[0, 100], [60, 20]]));
    await m.runUntil(60 + 270);
    expect(m.replicas).toBe(10);
    await m.runUntil(60 + 285);
    expect(m.replicas).toBe(2);
  });

  it('Value: a frozen value above target grows replicas every sync up to max; at target it holds', async () => {
    const up = model({ metricType: 'Value', target: 70, initialReplicas: 2, maxReplicaCount: 12 }, constant(90));
    await up.runUntil(15 * 8);
    expect(up.replicas).toBe(12);
    const hold = model({ metricType: 'Value', target: 70, initialReplicas: 5 }, constant(70));
    await hold.runUntil(900);
    expect(hold.replicas).toBe(5);
  });

  it('AverageValue: a frozen value freezes replicas', async () => {
    const m = model({ initialReplicas: 1 }, constant(40));
    await m.runUntil(900);
    expect(m.replicas).toBe(4);
  });

  it('activates from zero on the operator poll and cools down back to zero', async () => {
    const m = model({ minReplicaCount: 0, initialReplicas: 0, cooldownPeriodSeconds: 300 }, scripted([[0, 0], [40, 25], [400, 0]]));
    await m.runUntil(59);
    expect(m.replicas).toBe(0);
    await m.runUntil(60);
    expect(m.replicas).toBeGreaterThanOrEqual(1);
    await m.runUntil(120);
    expect(m.replicas).toBe(3);
    await m.runUntil(660);
    expect(m.replicas).toBe(3);
    await m.runUntil(690);
    expect(m.replicas).toBe(0);
  });
});

describe('KedaHpaModel: errors and fallback', () => {
  it('without fallback an erroring metric keeps the current count', async () => {
    const m = model({ initialReplicas: 6 }, scripted([[0, 60], [100, 'error']]));
    await m.runUntil(1000);
    expect(m.replicas).toBe(6);
  });

  it('fallback kicks in after more than failureThreshold failed polls', async () => {
    const fallback = { failureThreshold: 3, replicas: 2, behavior: 'static' as const };
    const m = model({ initialReplicas: 6, fallback }, scripted([[0, 60], [100, 'error']]));
    // Polls fail at 105 (hpa), 120 (operator), 120 (hpa); the 4th failure, at 135, crosses the threshold.
    await m.runUntil(120);
    expect(m.fallbackActive).toBe(false);
    await m.runUntil(135);
    expect(m.fallbackActive).toBe(true);
    // static 2 is a scale-down: it waits out the stabilisation window like any other.
    await m.runUntil(135 + 300);
    expect(m.replicas).toBe(2);
  });

  it('fallback currentReplicas holds the count', async () => {
    const fallback = { failureThreshold: 1, replicas: 1, behavior: 'currentReplicas' as const };
    const m = model({ initialReplicas: 6, fallback }, scripted([[0, 60], [100, 'error']]));
    await m.runUntil(1000);
    expect(m.fallbackActive).toBe(true);
    expect(m.replicas).toBe(6);
  });
});
