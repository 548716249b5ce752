import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The shim's Prometheus metrics (docs/api.md#metrics), on its own Registry. Label values
 * are catalogue query names and the fixed words below only — never request
 * input — so series are bounded by the catalogue.
 */
export const PREFIX = 'dfe_keda_shim_';

export const REQUEST_SOURCES = ['fresh', 'last_good', 'cold_hold', 'hold', 'stale', 'bad_request'] as const;
export type RequestSource = (typeof REQUEST_SOURCES)[number];

export const QUERY_OUTCOMES = ['success', 'error', 'timeout', 'bad_result'] as const;
export type QueryOutcome = (typeof QUERY_OUTCOMES)[number];

/** Why an answer did not come fresh from ClickHouse (`overload`: too many queries in flight, none started). */
export const FAILSAFE_REASONS = ['error', 'timeout', 'bad_result', 'deadline', 'overload'] as const;
export type FailSafeReason = (typeof FAILSAFE_REASONS)[number];

export const RELOAD_RESULTS = ['applied', 'rejected'] as const;
export type ReloadResult = (typeof RELOAD_RESULTS)[number];

/** How a wait for an admission slot ended (docs/failsafe.md#admission). */
export const ADMISSION_OUTCOMES = ['started', 'overload'] as const;
export type AdmissionOutcome = (typeof ADMISSION_OUTCOMES)[number];

const GAUGES_NAMED_LIKE_COUNTERS = ['nodejs_active_resources_total', 'nodejs_active_handles_total', 'nodejs_active_requests_total'] as const;

/**
 * What the request path records for one query between two scrapes: plain
 * numbers, bumped without a label lookup (prom-client hashes and validates the
 * label set on every `inc`/`set`, and its `labels()` children do too), folded
 * into the prom-client series when the registry is collected. docs/performance.md
 */
class QueryTally {
  /** Requests counted since the last collect, by source. */
  readonly pending: Record<RequestSource, number> = { fresh: 0, last_good: 0, cold_hold: 0, hold: 0, stale: 0, bad_request: 0 };
  /** Age of the value last served, once one was. */
  servedAge: number | undefined = undefined;
}

export class ShimMetrics {
  readonly requests: Counter<'query' | 'source'>;
  readonly queryDuration: Histogram<'query' | 'outcome'>;
  readonly failsafeAnswers: Counter<'query' | 'reason'>;
  readonly servedAge: Gauge<'query'>;
  readonly cacheEntries: Gauge;
  readonly inflight: Gauge;
  readonly reloads: Counter<'result'>;
  readonly admissionWait: Histogram<'query' | 'outcome'>;
  readonly batchSize: Histogram<'query'>;
  readonly queued: Gauge;
  /** What the queued gauge reads at a scrape (the executor sets it). */
  admissionQueued: () => number = () => 0;
  /** What the in-flight gauge reads at a scrape (the executor sets it): no gauge update per query. */
  inflightQueries: () => number = () => 0;
  /** Keyed by catalogue query name, so bounded by the catalogue. */
  private readonly tallies = new Map<string, QueryTally>();
  /** Queries whose series were made at 0 (knowQueries); forgetQuery forgets them. */
  private readonly known = new Set<string>();

  constructor(readonly registry: Registry = new Registry()) {
    const registers = [registry];
    // Process metrics keep their standard names (process_*, nodejs_*) so stock dashboards work.
    collectDefaultMetrics({ register: registry });
    // Except three gauges named like counters, which Prometheus' lint rejects (`promtool check
    // metrics`): each is the sum of its per-type twin (sum(nodejs_active_handles) and so on).
    for (const name of GAUGES_NAMED_LIKE_COUNTERS) registry.removeSingleMetric(name);
    this.requests = new Counter({
      name: `${PREFIX}requests_total`,
      help: 'Query answers by query and source (fresh, last_good, cold_hold, hold, stale, bad_request).',
      labelNames: ['query', 'source'],
      registers,
      collect: () => this.flushRequests(),
    });
    this.queryDuration = new Histogram({
      name: `${PREFIX}clickhouse_query_duration_seconds`,
      help: 'ClickHouse query duration by query and outcome (success, error, timeout, bad_result).',
      labelNames: ['query', 'outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.failsafeAnswers = new Counter({
      name: `${PREFIX}failsafe_answers_total`,
      help: 'Answers not fresh from ClickHouse, by query and reason (error, timeout, bad_result, deadline, overload).',
      labelNames: ['query', 'reason'],
      registers,
    });
    this.servedAge = new Gauge({
      name: `${PREFIX}served_value_age_seconds`,
      help: 'Age of the value last served for the query (0 for fresh and for held targets).',
      labelNames: ['query'],
      registers,
      collect: () => this.flushServedAge(),
    });
    this.cacheEntries = new Gauge({ name: `${PREFIX}cache_entries`, help: 'Last-good cache entries.', registers });
    this.inflight = new Gauge({
      name: `${PREFIX}inflight_queries`,
      help: 'ClickHouse queries in flight.',
      registers,
      collect: () => this.inflight.set(this.inflightQueries()),
    });
    this.reloads = new Counter({
      name: `${PREFIX}catalogue_reloads_total`,
      help: 'Catalogue reloads by result (applied, rejected).',
      labelNames: ['result'],
      registers,
    });
    // Every reload result exists from the start, so rate() and panels show 0, not "no data".
    for (const result of RELOAD_RESULTS) this.reloads.inc({ result }, 0);
    this.admissionWait = new Histogram({
      name: `${PREFIX}admission_wait_seconds`,
      help: 'Time a ClickHouse query waited for an admission slot, by query and outcome (started, overload).',
      labelNames: ['query', 'outcome'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.batchSize = new Histogram({
      name: `${PREFIX}batch_size`,
      help: 'Keys answered by one batched ClickHouse query, by query.',
      labelNames: ['query'],
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500],
      registers,
    });
    this.queued = new Gauge({
      name: `${PREFIX}admission_queued`,
      help: 'ClickHouse queries waiting for an admission slot.',
      registers,
      collect: () => this.queued.set(this.admissionQueued()),
    });
  }

  /**
   * Every series a catalogue query can have, at 0 (the Prometheus instrumentation guide: a
   * series exists before its first event, so a panel or an alert on it shows 0, not "no data").
   * Called with the live catalogue at start and after each reload; a query already known keeps
   * its values (a histogram's zero() would clear them). served_value_age_seconds reads 0 until
   * the query first serves a value.
   */
  knowQueries(names: Iterable<string>): void {
    for (const query of names) {
      if (this.known.has(query)) continue;
      this.known.add(query);
      this.tally(query);
      for (const reason of FAILSAFE_REASONS) this.failsafeAnswers.inc({ query, reason }, 0);
      for (const source of REQUEST_SOURCES) this.requests.inc({ query, source }, 0);
      for (const outcome of QUERY_OUTCOMES) this.queryDuration.zero({ query, outcome });
      for (const outcome of ADMISSION_OUTCOMES) this.admissionWait.zero({ query, outcome });
    }
  }

  private tally(query: string): QueryTally {
    let tally = this.tallies.get(query);
    if (tally === undefined) {
      tally = new QueryTally();
      this.tallies.set(query, tally);
    }
    return tally;
  }

  /** One request of `query` answered from `source` (requests_total). */
  countRequest(query: string, source: RequestSource): void {
    this.tally(query).pending[source] += 1;
  }

  /** One answer served: requests_total and served_value_age_seconds. */
  served(query: string, source: RequestSource, ageSeconds: number): void {
    const tally = this.tally(query);
    tally.pending[source] += 1;
    tally.servedAge = ageSeconds;
  }

  private flushRequests(): void {
    for (const [query, tally] of this.tallies) {
      for (const source of REQUEST_SOURCES) {
        const n = tally.pending[source];
        if (n === 0) continue;
        tally.pending[source] = 0;
        this.requests.inc({ query, source }, n);
      }
    }
  }

  private flushServedAge(): void {
    for (const [query, tally] of this.tallies) {
      this.servedAge.set({ query }, tally.servedAge ?? 0);
    }
  }

  /** Drops every series of a query the catalogue no longer has. */
  forgetQuery(query: string): void {
    this.tallies.delete(query);
    this.known.delete(query);
    for (const source of REQUEST_SOURCES) this.requests.remove({ query, source });
    for (const outcome of QUERY_OUTCOMES) this.queryDuration.remove({ query, outcome });
    for (const reason of FAILSAFE_REASONS) this.failsafeAnswers.remove({ query, reason });
    for (const outcome of ADMISSION_OUTCOMES) this.admissionWait.remove({ query, outcome });
    this.batchSize.remove({ query });
    this.servedAge.remove({ query });
  }
}
