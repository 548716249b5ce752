import type { GaugePoint } from '../../src/pressure/otel-table.js';
import { agedNs, otlpPoint, scrapePoint } from './gauge-fixture.js';

/**
 * The pressure rule's test vectors (the cases of rule.test.ts) as data: each
 * service's rows and the pressure the rule gives it. Service names carry a
 * prefix so several files can share one table.
 */
export interface PressureVector {
  readonly service: string;
  readonly expected: number;
  readonly points: readonly GaugePoint[];
}

export function pressureVectors(prefix: string, nowNs: bigint): PressureVector[] {
  const at = (ageSeconds: number) => agedNs(nowNs, ageSeconds);
  const s = (name: string) => `${prefix}${name}`;
  return [
    {
      service: s('names'),
      expected: 45,
      points: [
        otlpPoint(s('names'), 'p1', 'scaling_pressure', 30, at(5)),
        otlpPoint(s('names'), 'p2', 'dfe_scaling_pressure', 40, at(5)),
        otlpPoint(s('names'), 'p3', 'a_b_scaling_pressure', 45, at(5)),
        otlpPoint(s('names'), 'p4', 'xscaling_pressure', 99, at(5)),
        otlpPoint(s('names'), 'p5', 'scaling_pressure_total', 99, at(5)),
        otlpPoint(s('names'), 'p6', 'Scaling_Pressure', 99, at(5)),
      ],
    },
    { service: s('near-miss'), expected: 0, points: [otlpPoint(s('near-miss'), 'p1', 'xscaling_pressure', 80, at(5))] },
    {
      service: s('svc-a'),
      expected: 10,
      points: [
        otlpPoint(s('svc-a'), 'p1', 'scaling_pressure', 10, at(5)),
        otlpPoint(s('svc-a-canary'), 'p1', 'scaling_pressure', 90, at(5)),
        otlpPoint(s('SVC-A'), 'p1', 'scaling_pressure', 90, at(5)),
      ],
    },
    { service: s('svc-a-canary'), expected: 90, points: [] },
    {
      service: s('window'),
      expected: 20,
      points: [otlpPoint(s('window'), 'p1', 'scaling_pressure', 90, at(61)), otlpPoint(s('window'), 'p1', 'scaling_pressure', 20, at(30))],
    },
    {
      service: s('stale-job'),
      expected: 60,
      points: [
        scrapePoint(s('stale-job'), '10.0.0.1:9090', { pod: 'a' }, 'scaling_pressure', 60, at(20)),
        scrapePoint(s('stale-job'), '10.0.0.1:9090', { pod: 'a' }, 'scaling_pressure', 0, at(10), 1),
        scrapePoint(s('stale-job'), '10.0.0.2:9090', { pod: 'b' }, 'scaling_pressure', 0, at(10), 3),
      ],
    },
    {
      service: s('push'),
      expected: 85,
      points: [
        otlpPoint(s('push'), 'pod-busy', 'dfe_scaling_pressure', 90, at(30)),
        otlpPoint(s('push'), 'pod-busy', 'dfe_scaling_pressure', 80, at(10)),
        otlpPoint(s('push'), 'pod-idle', 'dfe_scaling_pressure', 10, at(30)),
        otlpPoint(s('push'), 'pod-idle', 'dfe_scaling_pressure', 20, at(10)),
      ],
    },
    {
      service: s('scrape-job'),
      expected: 72,
      points: [
        scrapePoint(s('scrape-job'), '10.0.0.1:9090', { pod: 'w-1' }, 'scaling_pressure', 70, at(25)),
        scrapePoint(s('scrape-job'), '10.0.0.1:9090', { pod: 'w-1' }, 'scaling_pressure', 74, at(10)),
        scrapePoint(s('scrape-job'), '10.0.0.2:9090', { pod: 'w-2' }, 'scaling_pressure', 5, at(25)),
        scrapePoint(s('scrape-job'), '10.0.0.2:9090', { pod: 'w-2' }, 'scaling_pressure', 15, at(10)),
      ],
    },
    {
      service: s('label-only'),
      expected: 88,
      points: [
        { ...scrapePoint(s('label-only'), 'x:1', { pod: 'a' }, 'scaling_pressure', 88, at(10)), resourceAttributes: {} },
        { ...scrapePoint(s('label-only'), 'x:1', { pod: 'b' }, 'scaling_pressure', 12, at(10)), resourceAttributes: {} },
      ],
    },
    {
      service: s('no-pod'),
      expected: 60,
      points: [
        otlpPoint(s('no-pod'), undefined, 'scaling_pressure', 40, at(20)),
        otlpPoint(s('no-pod'), undefined, 'scaling_pressure', 80, at(10)),
        otlpPoint(s('no-pod'), 'p1', 'scaling_pressure', 50, at(10)),
      ],
    },
    {
      service: s('attr-order'),
      expected: 50,
      points: [
        otlpPoint(s('attr-order'), 'p1', 'scaling_pressure', 20, at(20), { attributes: { a: '1', b: '2' } }),
        otlpPoint(s('attr-order'), 'p1', 'scaling_pressure', 80, at(10), { attributes: { b: '2', a: '1' } }),
      ],
    },
    {
      service: s('two-names'),
      expected: 70,
      points: [otlpPoint(s('two-names'), 'p1', 'a_scaling_pressure', 30, at(10)), otlpPoint(s('two-names'), 'p1', 'b_scaling_pressure', 70, at(10))],
    },
    { service: s('negative'), expected: 0, points: [otlpPoint(s('negative'), 'p1', 'scaling_pressure', -50, at(10))] },
    { service: s('over'), expected: 100, points: [otlpPoint(s('over'), 'p1', 'scaling_pressure', 250, at(10))] },
    {
      service: s('mixed'),
      expected: 30,
      points: [otlpPoint(s('mixed'), 'p1', 'scaling_pressure', -1000, at(20)), otlpPoint(s('mixed'), 'p1', 'scaling_pressure', 60, at(10))],
    },
    {
      service: s('non-finite'),
      expected: 25,
      points: [
        otlpPoint(s('non-finite'), 'p1', 'scaling_pressure', Number.POSITIVE_INFINITY, at(20)),
        otlpPoint(s('non-finite'), 'p1', 'scaling_pressure', Number.NaN, at(15)),
        otlpPoint(s('non-finite'), 'p1', 'scaling_pressure', Number.NEGATIVE_INFINITY, at(12)),
        otlpPoint(s('non-finite'), 'p1', 'scaling_pressure', 25, at(10)),
      ],
    },
    { service: s('only-inf'), expected: 0, points: [otlpPoint(s('only-inf'), 'p1', 'scaling_pressure', Number.POSITIVE_INFINITY, at(10))] },
    { service: s('fraction'), expected: 33.333, points: [otlpPoint(s('fraction'), 'p1', 'scaling_pressure', 100 / 3, at(10))] },
    { service: s('nobody-emits-this'), expected: 0, points: [] },
  ];
}
