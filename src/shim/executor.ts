import { LRUCache } from 'lru-cache';
import type { CompiledQuery } from '../catalogue/types.js';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { withSpan, type Span } from '../telemetry/trace.js';
import { pollSpan, traceAnswer, type CacheDecision } from './answer-trace.js';
import { missedHold, onFailure, reusable, type Answer, type GoodValue } from './decision.js';
import { fly, type FlightOutcome, type FlightReport } from './flight.js';
import { cacheKey, type DeclaredParams } from './key.js';
import type { FailSafeReason, ShimMetrics } from './metrics.js';
import type { StatusBoard } from './status-board.js';
import { servedValue } from './value.js';

/**
 * The fail-safe query path (docs/failsafe.md): reuse a young value, else join or start
 * the one ClickHouse query for the key, wait at most `deadline_ms`, and fall
 * back per decision.ts. A query that outlives the deadline keeps running and
 * refreshes the cache when it lands.
 */
export interface ExecutorOptions {
  /** Read at every query start, so a swapped client is picked up. */
  readonly clickhouse: Pick<ClickHouseHandle, 'client' | 'afterQueryError'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: ShimMetrics;
  readonly status: StatusBoard;
  /** Bound of the last-good cache (LRU), default 10 000 keys. */
  readonly cacheMaxKeys?: number;
  /**
   * Whether the live catalogue still has the query. An answer or a flight that
   * lands after a reload removed its query records no metric or status, so the
   * series the reload dropped do not come back. Default: always.
   */
  readonly isLive?: (queryName: string) => boolean;
  /** Most ClickHouse queries in flight at once; past it a new query is refused (reason `overload`). */
  readonly maxInflight?: number;
  /** Most in flight for one catalogue query (all its keys together). */
  readonly maxInflightPerQuery?: number;
}

interface CacheEntry extends GoodValue {
  readonly query: string;
}

interface Flight {
  readonly promise: Promise<FlightOutcome>;
}

/** Failures of one key are logged at most this often. */
export const FAILURE_LOG_INTERVAL_MS = 60_000;

/**
 * Bounds on queries in flight (docs/failsafe.md#one-keys-fault-stays-its-own).
 * Each flight holds one socket for at most timeout_seconds + 0.5 s; the
 * global bound stays under the client's pool (MAX_OPEN_CONNECTIONS, 256), so
 * a query never waits in the pool's queue behind stalled ones, and one query's
 * keys (however many params) take at most 32 of it. Past a bound the new query
 * is not started and not queued: the request is answered from the fail-safe
 * path at once.
 */
export const MAX_INFLIGHT = 200;
export const MAX_INFLIGHT_PER_QUERY = 32;

export class QueryExecutor {
  private readonly cache: LRUCache<string, CacheEntry>;
  private readonly inflight = new Map<string, Flight>();
  /** Bumped when a query changes or goes, so a flight of the old definition cannot write the cache. */
  private readonly epochs = new Map<string, number>();
  private readonly lastLoggedMs: LRUCache<string, number>;
  private readonly warnedNoHold = new Set<string>();
  private started = 0;
  private running = 0;
  private readonly runningPerQuery = new Map<string, number>();

  constructor(private readonly options: ExecutorOptions) {
    const max = options.cacheMaxKeys ?? 10_000;
    this.cache = new LRUCache({ max });
    this.lastLoggedMs = new LRUCache({ max });
  }

  /** ClickHouse queries started so far (tests and /status). */
  get queriesStarted(): number {
    return this.started;
  }

  get cacheSize(): number {
    return this.cache.size;
  }

  /**
   * Step 1 alone, synchronous: a young cached value, served (metrics, status),
   * or undefined, and then `answer`. The query route answers a cache hit
   * without a promise (docs/performance.md).
   */
  cached(query: CompiledQuery, params: DeclaredParams): Answer | undefined {
    return this.reuse(cacheKey(query.name, query.params, params), query);
  }

  async answer(query: CompiledQuery, params: DeclaredParams, hold: number | undefined): Promise<Answer> {
    const key = cacheKey(query.name, query.params, params);
    const reused = this.reuse(key, query);
    if (reused !== undefined) return reused;
    const poll = pollSpan();
    const joined = this.inflight.get(key);
    const flight = joined ?? this.admit(key, query, params);
    const decision = joined !== undefined ? 'joined' : flight !== undefined ? 'started' : 'refused';
    const outcome = flight === undefined ? this.overloaded(query) : await settleWithin(flight.promise, query.deadlineMs);
    if (outcome.kind === 'ok') return this.traced(poll, query, decision, this.served(query, { source: 'fresh', value: outcome.value, ageSeconds: 0 }));
    const reason: FailSafeReason = outcome.kind === 'deadline' ? 'deadline' : outcome.reason;
    const message = outcome.kind === 'deadline' ? `no answer within deadline_ms=${query.deadlineMs}; the query keeps running` : outcome.message;
    const answer = onFailure(this.cache.get(key), query, this.options.clock.nowMs(), hold);
    if (this.isLive(query)) this.options.metrics.failsafeAnswers.inc({ query: query.name, reason });
    // Under the poll's span again, so the line carries its trace_id.
    withSpan(poll, () => this.logFailure(key, query, params, reason, message, answer));
    if (answer.source === 'last_good' && missedHold(query, hold)) this.warnNoHold(query);
    return this.traced(poll, query, decision, this.served(query, answer), reason);
  }

  private reuse(key: string, query: CompiledQuery): Answer | undefined {
    const reused = reusable(this.cache.get(key), query, this.options.clock.nowMs());
    return reused === undefined ? undefined : this.traced(pollSpan(), query, 'young', this.served(query, reused));
  }

  /** The cache decision on the poll's span (answer-trace.ts); the answer unchanged. */
  private traced(poll: Span | undefined, query: CompiledQuery, decision: CacheDecision, answer: Answer, reason?: FailSafeReason): Answer {
    traceAnswer(poll, query.name, decision, answer, reason);
    return answer;
  }

  /** Drops cache entries (and in-flight joins) of queries that changed or went. */
  invalidate(names: Iterable<string>): void {
    const gone = new Set(names);
    if (gone.size === 0) return;
    for (const name of gone) {
      this.epochs.set(name, (this.epochs.get(name) ?? 0) + 1);
      this.warnedNoHold.delete(name);
    }
    for (const [key, entry] of this.cache.entries()) if (gone.has(entry.query)) this.cache.delete(key);
    for (const key of this.inflight.keys()) if (gone.has(queryOfKey(key))) this.inflight.delete(key);
    this.options.metrics.cacheEntries.set(this.cache.size);
  }

  /** Starts the key's query if the bounds allow it; undefined when they do not (nothing is queued). */
  private admit(key: string, query: CompiledQuery, params: DeclaredParams): Flight | undefined {
    const max = this.options.maxInflight ?? MAX_INFLIGHT;
    const maxPerQuery = this.options.maxInflightPerQuery ?? MAX_INFLIGHT_PER_QUERY;
    const ofQuery = this.runningPerQuery.get(query.name) ?? 0;
    if (this.running >= max || ofQuery >= maxPerQuery) return undefined;
    this.running += 1;
    this.runningPerQuery.set(query.name, ofQuery + 1);
    const flight = this.start(key, query, params);
    void flight.promise.then(() => {
      this.running -= 1;
      const left = (this.runningPerQuery.get(query.name) ?? 1) - 1;
      if (left === 0) this.runningPerQuery.delete(query.name);
      else this.runningPerQuery.set(query.name, left);
    });
    return flight;
  }

  private start(key: string, query: CompiledQuery, params: DeclaredParams): Flight {
    const { metrics, status, clock, clickhouse } = this.options;
    const epoch = this.epochs.get(query.name) ?? 0;
    this.started += 1;
    metrics.inflight.inc();
    const promise = fly(clickhouse.client, query, params, { afterError: clickhouse.afterQueryError }).then((report: FlightReport) => {
      metrics.inflight.dec();
      if (this.inflight.get(key) === flight) this.inflight.delete(key);
      const { outcome } = report;
      const live = this.isLive(query);
      if (live) {
        metrics.queryDuration.observe(
          { query: query.name, outcome: outcome.kind === 'ok' ? 'success' : outcome.reason },
          report.durationSeconds,
        );
      }
      // Failures never write the cache; a flight of a since-changed definition neither.
      if (outcome.kind === 'ok' && (this.epochs.get(query.name) ?? 0) === epoch) {
        this.cache.set(key, { query: query.name, value: outcome.value, atMs: clock.nowMs() });
        metrics.cacheEntries.set(this.cache.size);
      }
      if (outcome.kind === 'failed' && live) status.failed(query.name, outcome.reason, outcome.message);
      return outcome;
    });
    const flight: Flight = { promise };
    this.inflight.set(key, flight);
    return flight;
  }

  private overloaded(query: CompiledQuery): Settled {
    const max = this.options.maxInflight ?? MAX_INFLIGHT;
    const maxPerQuery = this.options.maxInflightPerQuery ?? MAX_INFLIGHT_PER_QUERY;
    return {
      kind: 'failed',
      reason: 'overload',
      message: `not started: ${this.running} of at most ${max} queries in flight, ${this.runningPerQuery.get(query.name) ?? 0} of at most ${maxPerQuery} of this query (slow or stalled answers)`,
    };
  }

  private isLive(query: CompiledQuery): boolean {
    return this.options.isLive?.(query.name) ?? true;
  }

  private served(query: CompiledQuery, answer: Answer): Answer {
    const { metrics, status, clock } = this.options;
    const live = this.isLive(query);
    if (live) metrics.served(query.name, answer.source, answer.ageSeconds);
    if (answer.source === 'stale') return answer;
    const value = servedValue(answer.value);
    if (live) status.served(query.name, answer.source, value, clock.nowMs() - answer.ageSeconds * 1000);
    // Cached values are stored already served-safe: no copy on the hot path.
    return value === answer.value ? answer : { ...answer, value };
  }

  private logFailure(key: string, query: CompiledQuery, params: DeclaredParams, reason: FailSafeReason, error: string, answer: Answer): void {
    const now = this.options.clock.nowMs();
    const last = this.lastLoggedMs.get(key);
    if (last !== undefined && now - last < FAILURE_LOG_INTERVAL_MS) return;
    this.lastLoggedMs.set(key, now);
    const held = answer.source === 'stale' ? { source: 'stale', ageSeconds: answer.ageSeconds } : { source: answer.source, value: answer.value };
    this.options.logger.warn({ query: query.name, params, reason, error, held }, 'query failed; answered from the fail-safe path');
  }

  private warnNoHold(query: CompiledQuery): void {
    if (this.warnedNoHold.has(query.name)) return;
    this.warnedNoHold.add(query.name);
    this.options.logger.warn(
      { query: query.name },
      'metric_type Value query answered last-good: pass hold=<trigger target> in the URL so a failure holds the replica count',
    );
  }
}

function queryOfKey(key: string): string {
  return (JSON.parse(key) as [string])[0];
}

type Settled = FlightOutcome | { readonly kind: 'deadline' } | { readonly kind: 'failed'; readonly reason: 'overload'; readonly message: string };

/** The flight's outcome, or `deadline` if it has not settled within `deadlineMs` (the flight goes on). */
async function settleWithin(promise: Promise<FlightOutcome>, deadlineMs: number): Promise<Settled> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'deadline' }), deadlineMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
