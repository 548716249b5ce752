import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../helpers/clickhouse.js';
import { agedNs, openGaugeFixture, otlpPoint, scrapePoint, type GaugeFixture } from '../helpers/gauge-fixture.js';

/**
 * docs/pressure.md#the-rule on the real engine, with rows shaped as an OTLP push and as a
 * Prometheus scrape write them. Each test uses its own service name, so tests
 * share one table without seeing each other's rows.
 */
let fx: GaugeFixture;
let now: bigint;

beforeAll(async () => {
  fx = await openGaugeFixture();
  now = await fx.engineNowNs();
});
afterAll(async () => fx?.close());

const at = (ageSeconds: number) => agedNs(now, ageSeconds);

describe('pressure rule: names', () => {
  it('matches the bare name and any `<prefix>_` spelling, nothing else', async () => {
    await fx.write([
      otlpPoint('names', 'p1', 'scaling_pressure', 30, at(5)),
      otlpPoint('names', 'p2', 'dfe_scaling_pressure', 40, at(5)),
      otlpPoint('names', 'p3', 'a_b_scaling_pressure', 45, at(5)),
      otlpPoint('names', 'p4', 'xscaling_pressure', 99, at(5)),
      otlpPoint('names', 'p5', 'scaling_pressure_total', 99, at(5)),
      otlpPoint('names', 'p6', 'Scaling_Pressure', 99, at(5)),
      otlpPoint('names', 'p7', 'scaling_pressure_bucket', 99, at(5)),
    ]);
    expect(await fx.pressure('names')).toBe(45);
  });

  it('a near-miss name alone reads as no rows: 0', async () => {
    await fx.write([
      otlpPoint('near-miss', 'p1', 'xscaling_pressure', 80, at(5)),
      otlpPoint('near-miss', 'p1', 'scaling_pressure_total', 80, at(5)),
    ]);
    expect(await fx.pressure('near-miss')).toBe(0);
  });
});

describe('pressure rule: service and window', () => {
  it('counts only rows whose ServiceName equals the service exactly', async () => {
    await fx.write([
      otlpPoint('svc-a', 'p1', 'scaling_pressure', 10, at(5)),
      otlpPoint('svc-a-canary', 'p1', 'scaling_pressure', 90, at(5)),
      otlpPoint('SVC-A', 'p1', 'scaling_pressure', 90, at(5)),
      otlpPoint('xsvc-a', 'p1', 'scaling_pressure', 90, at(5)),
    ]);
    expect(await fx.pressure('svc-a')).toBe(10);
  });

  it('ignores rows older than window_seconds, and the window is the bound parameter', async () => {
    await fx.write([
      otlpPoint('window', 'p1', 'scaling_pressure', 90, at(61)),
      otlpPoint('window', 'p1', 'scaling_pressure', 20, at(30)),
    ]);
    expect(await fx.pressure('window', 60)).toBe(20);
    expect(await fx.pressure('window', 120)).toBe(55);
    expect(await fx.pressure('window', 10)).toBe(0);
  });

  it('ignores staleness markers (Flags bit 1) instead of averaging their 0 in', async () => {
    await fx.write([
      scrapePoint('stale-job', '10.0.0.1:9090', { pod: 'a' }, 'scaling_pressure', 60, at(20)),
      scrapePoint('stale-job', '10.0.0.1:9090', { pod: 'a' }, 'scaling_pressure', 0, at(10), 1),
      scrapePoint('stale-job', '10.0.0.2:9090', { pod: 'b' }, 'scaling_pressure', 0, at(10), 3),
    ]);
    expect(await fx.pressure('stale-job')).toBe(60);
  });
});

describe('pressure rule: series and reduction', () => {
  it('OTLP push: a busy pod and an idle pod give the busy value, not their average', async () => {
    await fx.write([
      otlpPoint('push', 'pod-busy', 'dfe_scaling_pressure', 90, at(30)),
      otlpPoint('push', 'pod-busy', 'dfe_scaling_pressure', 80, at(10)),
      otlpPoint('push', 'pod-idle', 'dfe_scaling_pressure', 10, at(30)),
      otlpPoint('push', 'pod-idle', 'dfe_scaling_pressure', 20, at(10)),
    ]);
    expect(await fx.pressure('push')).toBe(85);
  });

  it('Prometheus scrape: pods told apart by instance and pod label', async () => {
    await fx.write([
      scrapePoint('scrape-job', '10.0.0.1:9090', { pod: 'w-1' }, 'scaling_pressure', 70, at(25)),
      scrapePoint('scrape-job', '10.0.0.1:9090', { pod: 'w-1' }, 'scaling_pressure', 74, at(10)),
      scrapePoint('scrape-job', '10.0.0.2:9090', { pod: 'w-2' }, 'scaling_pressure', 5, at(25)),
      scrapePoint('scrape-job', '10.0.0.2:9090', { pod: 'w-2' }, 'scaling_pressure', 15, at(10)),
    ]);
    expect(await fx.pressure('scrape-job')).toBe(72);
  });

  it('scrape without an instance: the pod label alone separates series', async () => {
    await fx.write([
      { ...scrapePoint('label-only', 'x:1', { pod: 'a' }, 'scaling_pressure', 88, at(10)), resourceAttributes: {} },
      { ...scrapePoint('label-only', 'x:1', { pod: 'b' }, 'scaling_pressure', 12, at(10)), resourceAttributes: {} },
    ]);
    expect(await fx.pressure('label-only')).toBe(88);
  });

  it('rows naming no pod share one series (averaged together)', async () => {
    await fx.write([
      otlpPoint('no-pod', undefined, 'scaling_pressure', 40, at(20)),
      otlpPoint('no-pod', undefined, 'scaling_pressure', 80, at(10)),
      otlpPoint('no-pod', 'p1', 'scaling_pressure', 50, at(10)),
    ]);
    expect(await fx.pressure('no-pod')).toBe(60);
  });

  it('the same attributes written in another order are one series', async () => {
    await fx.write([
      otlpPoint('attr-order', 'p1', 'scaling_pressure', 20, at(20), { attributes: { a: '1', b: '2' } }),
      otlpPoint('attr-order', 'p1', 'scaling_pressure', 80, at(10), { attributes: { b: '2', a: '1' } }),
    ]);
    expect(await fx.pressure('attr-order')).toBe(50);
  });

  it('two prefixes on one pod are two series', async () => {
    await fx.write([
      otlpPoint('two-names', 'p1', 'a_scaling_pressure', 30, at(10)),
      otlpPoint('two-names', 'p1', 'b_scaling_pressure', 70, at(10)),
    ]);
    expect(await fx.pressure('two-names')).toBe(70);
  });
});

describe('pressure rule: bad values never scale up', () => {
  it('clamps negatives to 0 (never wrapped into a large unsigned number)', async () => {
    await fx.write([otlpPoint('negative', 'p1', 'scaling_pressure', -50, at(10))]);
    expect(await fx.pressure('negative')).toBe(0);
  });

  it('clamps values above 100 to 100', async () => {
    await fx.write([otlpPoint('over', 'p1', 'scaling_pressure', 250, at(10))]);
    expect(await fx.pressure('over')).toBe(100);
  });

  it('clamps each point before averaging', async () => {
    await fx.write([
      otlpPoint('mixed', 'p1', 'scaling_pressure', -1000, at(20)),
      otlpPoint('mixed', 'p1', 'scaling_pressure', 60, at(10)),
    ]);
    expect(await fx.pressure('mixed')).toBe(30);
  });

  it('drops non-finite points', async () => {
    await fx.write([
      otlpPoint('non-finite', 'p1', 'scaling_pressure', Number.POSITIVE_INFINITY, at(20)),
      otlpPoint('non-finite', 'p1', 'scaling_pressure', Number.NaN, at(15)),
      otlpPoint('non-finite', 'p1', 'scaling_pressure', Number.NEGATIVE_INFINITY, at(12)),
      otlpPoint('non-finite', 'p1', 'scaling_pressure', 25, at(10)),
      otlpPoint('only-inf', 'p1', 'scaling_pressure', Number.POSITIVE_INFINITY, at(10)),
    ]);
    // The engine really holds the non-finite values (not nulls or zeros).
    const [stored] = await queryRows<{ inf: number; nan: number; neg: number }>(
      fx.db,
      `SELECT countIf(Value = inf) AS inf, countIf(isNaN(Value)) AS nan, countIf(Value = -inf) AS neg
       FROM \`${fx.db.database}\`.otel_metrics_gauge WHERE ServiceName = 'non-finite'`,
    );
    expect(stored).toEqual({ inf: 1, nan: 1, neg: 1 });
    expect(await fx.pressure('non-finite')).toBe(25);
    expect(await fx.pressure('only-inf')).toBe(0);
  });

  it('no rows → exactly one row holding the number 0', async () => {
    expect(await fx.pressure('nobody-emits-this')).toBe(0);
  });
});
