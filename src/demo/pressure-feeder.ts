import type { ClickHouseClient } from '@clickhouse/client';
import { systemClock, type Clock } from '../clock.js';
import { insertGaugePoints, type GaugePoint } from '../pressure/otel-table.js';
import { PRESSURE_MAX, PRESSURE_METRIC, PRESSURE_MIN } from '../pressure/rule.js';

/**
 * A stand-in for apps pushing `scaling_pressure` over OTLP, for the embedded
 * demo: every tick it writes one point per pod, shaped as the collector's
 * exporter stores an OTLP push (pod in `ResourceAttributes['service.instance.id']`),
 * so `curl '/keda/pressure?service=…'` shows a live, moving number.
 */
export interface FeederService {
  readonly service: string;
  /** Metric name as the app emits it: bare or `<prefix>_scaling_pressure`. */
  readonly metricName: string;
  readonly pods: readonly string[];
  /** Centre of the wave, 0–100. */
  readonly baseline: number;
  /** Amplitude of the wave. */
  readonly swing: number;
  readonly periodSeconds: number;
}

export const DEMO_PRESSURE_SERVICES: readonly FeederService[] = Object.freeze([
  { service: 'demo-ingest', metricName: `demo_${PRESSURE_METRIC}`, pods: ['demo-ingest-0', 'demo-ingest-1'], baseline: 60, swing: 30, periodSeconds: 300 },
  { service: 'demo-transform', metricName: PRESSURE_METRIC, pods: ['demo-transform-0'], baseline: 25, swing: 15, periodSeconds: 180 },
]);

/** The points of one tick (pure). Pods of a service run out of phase, so the hottest one shows. */
export function feederPoints(services: readonly FeederService[], nowMs: number): GaugePoint[] {
  const timeUnixNs = BigInt(Math.trunc(nowMs)) * 1_000_000n;
  return services.flatMap((s) =>
    s.pods.map((pod, index) => {
      const angle = (2 * Math.PI * nowMs) / (s.periodSeconds * 1000) + (index * Math.PI) / 2;
      const raw = s.baseline + s.swing * Math.sin(angle);
      const value = Math.round(Math.min(PRESSURE_MAX, Math.max(PRESSURE_MIN, raw)) * 10) / 10;
      return {
        serviceName: s.service,
        metricName: s.metricName,
        value,
        timeUnixNs,
        resourceAttributes: { 'service.instance.id': pod, 'k8s.pod.name': pod },
      };
    }),
  );
}

export interface FeederOptions {
  readonly client: ClickHouseClient;
  /** Database holding `otel_metrics_gauge` (the shim's otel database). */
  readonly database: string;
  /** Called for each failed write; the feeder keeps ticking. */
  readonly onError: (err: unknown) => void;
  /** Default: the demo services above. */
  readonly services?: readonly FeederService[];
  /** Time between writes. Default 5000 ms. */
  readonly intervalMs?: number;
  readonly clock?: Clock;
}

export interface PressureFeeder {
  /** Stops ticking and waits for a write in progress. */
  stop(): Promise<void>;
}

export function startPressureFeeder(options: FeederOptions): PressureFeeder {
  const { client, database, onError } = options;
  const services = options.services ?? DEMO_PRESSURE_SERVICES;
  const intervalMs = options.intervalMs ?? 5000;
  const clock = options.clock ?? systemClock;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();

  const tick = (): void => {
    inFlight = insertGaugePoints(client, database, feederPoints(services, clock.nowMs()))
      .catch(onError)
      .finally(() => {
        // Chained rather than setInterval so a slow write never overlaps the next.
        if (!stopped) timer = setTimeout(tick, intervalMs);
      });
  };
  tick();

  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inFlight;
    },
  };
}
