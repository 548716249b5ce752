/**
 * A small model of KEDA's metrics-api trigger and the HPA behind it, in virtual
 * time (reference/keda-and-hpa.md). No timers, no I/O of its own: the metric
 * comes from an injected `FetchMetric` (a scripted function in unit tests, real
 * HTTP to the real shim in test/model/). What it models:
 *
 * - KEDA's operator loop polls every `pollingIntervalSeconds` (activation 0 ↔ 1,
 *   cooldown to `minReplicaCount` 0); the HPA syncs every `hpaSyncSeconds` while
 *   replicas ≥ 1 and fetches once per sync. Any non-200 is an error, and KEDA
 *   retries at once: two requests per failed poll.
 * - `fallback` after more than `failureThreshold` consecutive failed polls.
 * - HPA: `AverageValue` → ceil(value / target); `Value` → ceil(current × value / target);
 *   10 % tolerance; scale-up limit max(+100 %, +4) per 15 s; scale-down
 *   stabilisation (highest recommendation over 300 s); min/max.
 * Not modelled: several triggers, scale-down rate policies (the default, 100 %
 * per 15 s, never binds), pod readiness, `useCachedMetrics`.
 */
export type MetricReading = { readonly kind: 'value'; readonly value: number } | { readonly kind: 'error'; readonly reason: string };

/** One request as KEDA's metrics-api scaler makes it; `atSeconds` is virtual time. */
export type FetchMetric = (atSeconds: number) => Promise<MetricReading>;

export type MetricType = 'AverageValue' | 'Value';
export type FallbackBehavior = 'static' | 'currentReplicas' | 'currentReplicasIfHigher' | 'currentReplicasIfLower';

export interface ModelOptions {
  readonly metricType: MetricType;
  readonly target: number;
  /** Active while value > this. Default 0. */
  readonly activationTarget?: number;
  /** Default 0 (KEDA's default). The HPA's own minimum is max(this, 1). */
  readonly minReplicaCount?: number;
  /** Default 100. */
  readonly maxReplicaCount?: number;
  readonly initialReplicas: number;
  /** Default 30 s. */
  readonly pollingIntervalSeconds?: number;
  /** Default 300 s before scaling an inactive workload to a minReplicaCount of 0. */
  readonly cooldownPeriodSeconds?: number;
  /** HPA sync period. Default 15 s. */
  readonly hpaSyncSeconds?: number;
  readonly fallback?: { readonly failureThreshold: number; readonly replicas: number; readonly behavior: FallbackBehavior };
}

export type Loop = 'operator' | 'hpa';

export interface ModelStep {
  readonly atSeconds: number;
  readonly loop: Loop;
  readonly requests: number;
  readonly reading: MetricReading;
  readonly replicasBefore: number;
  readonly replicasAfter: number;
}

const TOLERANCE = 0.1;
const SCALE_DOWN_WINDOW_SECONDS = 300;
const SCALE_UP_PERIOD_SECONDS = 15;
const SCALE_UP_PERCENT = 100;
const SCALE_UP_PODS = 4;

/** Parses an HTTP answer as KEDA's metrics-api scaler does (`valueLocation` a top-level key). */
export function readMetricsApi(status: number, body: string, valueLocation = 'value'): MetricReading {
  if (status !== 200) return { kind: 'error', reason: `HTTP ${status}` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { kind: 'error', reason: 'body is not JSON' };
  }
  const raw = parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>)[valueLocation] : undefined;
  let value: number;
  if (typeof raw === 'number') value = raw;
  else if (typeof raw === 'string') value = parseQuantity(raw);
  else return { kind: 'error', reason: `${valueLocation} is ${raw === null ? 'null' : typeof raw}` };
  // KEDA turns NaN, ±Inf and negatives into 0 and keeps milli-units.
  if (!Number.isFinite(value) || value < 0) value = 0;
  return { kind: 'value', value: Math.round(value * 1000) / 1000 };
}

/** The subset of Kubernetes quantities a metric value uses: plain decimals and milli (`10m`). */
function parseQuantity(text: string): number {
  const m = /^(-?\d+(?:\.\d+)?)(m?)$/.exec(text.trim());
  if (!m) return Number.NaN;
  return Number(m[1]) / (m[2] === 'm' ? 1000 : 1);
}

/** The HPA's desired count for one external metric, before behaviours and bounds. */
export function hpaRawDesired(metricType: MetricType, target: number, current: number, value: number): number {
  if (metricType === 'AverageValue') {
    const ratio = value / (target * current);
    return Math.abs(ratio - 1) <= TOLERANCE ? current : Math.ceil(value / target);
  }
  const ratio = value / target;
  return Math.abs(ratio - 1) <= TOLERANCE ? current : Math.ceil(ratio * current);
}

export function fallbackDesired(behavior: FallbackBehavior, current: number, replicas: number): number {
  switch (behavior) {
    case 'static':
      return replicas;
    case 'currentReplicas':
      return current;
    case 'currentReplicasIfHigher':
      return Math.max(current, replicas);
    case 'currentReplicasIfLower':
      return Math.min(current, replicas);
  }
}

export class KedaHpaModel {
  replicas: number;
  nowSeconds = 0;
  requests = 0;
  readonly steps: ModelStep[] = [];
  private consecutiveFailures = 0;
  private lastActiveAtSeconds = 0;
  private nextPollAt = 0;
  private nextSyncAt = 0;
  private recommendations: { atSeconds: number; replicas: number }[] = [];
  private scaleUps: { atSeconds: number; added: number }[] = [];
  private readonly o: Required<Omit<ModelOptions, 'fallback'>> & Pick<ModelOptions, 'fallback'>;

  constructor(options: ModelOptions, private readonly fetchMetric: FetchMetric) {
    this.o = {
      activationTarget: 0,
      minReplicaCount: 0,
      maxReplicaCount: 100,
      pollingIntervalSeconds: 30,
      cooldownPeriodSeconds: 300,
      hpaSyncSeconds: 15,
      ...options,
    };
    this.replicas = options.initialReplicas;
  }

  /** Runs every poll and sync due at or before `endSeconds` (operator first on a tie). */
  async runUntil(endSeconds: number): Promise<void> {
    for (;;) {
      const next = Math.min(this.nextPollAt, this.nextSyncAt);
      if (next > endSeconds) break;
      this.nowSeconds = next;
      if (this.nextPollAt === next) {
        this.nextPollAt += this.o.pollingIntervalSeconds;
        await this.operatorPoll();
      }
      if (this.nextSyncAt === next) {
        this.nextSyncAt += this.o.hpaSyncSeconds;
        if (this.replicas >= 1) await this.hpaSync();
      }
    }
    this.nowSeconds = endSeconds;
  }

  /** Whether KEDA is currently feeding the fallback instead of the metric. */
  get fallbackActive(): boolean {
    return this.o.fallback !== undefined && this.consecutiveFailures > this.o.fallback.failureThreshold;
  }

  private get hpaMin(): number {
    return Math.max(this.o.minReplicaCount, 1);
  }

  private async poll(): Promise<{ reading: MetricReading; requests: number }> {
    let reading = await this.fetchMetric(this.nowSeconds);
    let requests = 1;
    if (reading.kind === 'error') {
      // KEDA rebuilds the scaler and asks again at once.
      reading = await this.fetchMetric(this.nowSeconds);
      requests = 2;
    }
    this.requests += requests;
    this.consecutiveFailures = reading.kind === 'error' ? this.consecutiveFailures + 1 : 0;
    return { reading, requests };
  }

  private async operatorPoll(): Promise<void> {
    const before = this.replicas;
    const { reading, requests } = await this.poll();
    if (reading.kind === 'value') {
      const active = reading.value > this.o.activationTarget;
      if (active) this.lastActiveAtSeconds = this.nowSeconds;
      if (this.replicas === 0 && active) this.replicas = this.hpaMin;
      const cooled = this.nowSeconds - this.lastActiveAtSeconds >= this.o.cooldownPeriodSeconds;
      if (this.replicas > 0 && !active && this.o.minReplicaCount === 0 && cooled) this.replicas = 0;
    } else if (this.replicas === 0 && this.fallbackActive) {
      this.replicas = this.hpaMin;
    }
    this.record('operator', requests, reading, before);
  }

  private async hpaSync(): Promise<void> {
    const before = this.replicas;
    const { reading, requests } = await this.poll();
    let raw: number | undefined;
    if (reading.kind === 'value') raw = hpaRawDesired(this.o.metricType, this.o.target, this.replicas, reading.value);
    else if (this.fallbackActive && this.o.fallback) raw = fallbackDesired(this.o.fallback.behavior, this.replicas, this.o.fallback.replicas);
    // No value and no fallback: the HPA cannot compute a count and keeps the current one.
    if (raw !== undefined) this.replicas = this.normalise(raw);
    if (this.replicas > before) this.scaleUps.push({ atSeconds: this.nowSeconds, added: this.replicas - before });
    this.record('hpa', requests, reading, before);
  }

  /** Stabilisation, the scale-up rate limit, then min/max — in the HPA's order. */
  private normalise(raw: number): number {
    const t = this.nowSeconds;
    this.recommendations = this.recommendations.filter((r) => r.atSeconds > t - SCALE_DOWN_WINDOW_SECONDS);
    const down = Math.max(raw, ...this.recommendations.map((r) => r.replicas));
    this.recommendations.push({ atSeconds: t, replicas: raw });
    let desired = Math.min(Math.max(this.replicas, raw), down);

    this.scaleUps = this.scaleUps.filter((s) => s.atSeconds > t - SCALE_UP_PERIOD_SECONDS);
    const periodStart = this.replicas - this.scaleUps.reduce((n, s) => n + s.added, 0);
    const upLimit = Math.max(Math.ceil(periodStart * (1 + SCALE_UP_PERCENT / 100)), periodStart + SCALE_UP_PODS);
    desired = Math.min(desired, upLimit);
    return Math.min(Math.max(desired, this.hpaMin), this.o.maxReplicaCount);
  }

  private record(loop: Loop, requests: number, reading: MetricReading, replicasBefore: number): void {
    this.steps.push({ atSeconds: this.nowSeconds, loop, requests, reading, replicasBefore, replicasAfter: this.replicas });
  }
}
