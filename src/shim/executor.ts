import { LRUCache } from 'lru-cache';
import type { CompiledQuery } from '../catalogue/types.js';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { missedHold, onFailure, reusable, type Answer, type GoodValue } from './decision.js';
import { Admission, type AdmissionLimits, type Ticket } from './admission/admission.js';
import { BatchCollector, type BatchPolicy } from './admission/batches.js';
import { waitBudgetMs } from './admission/budget.js';
import type { Timers } from './admission/timers.js';
import { flyBatch, type BatchedQuery, type BatchReport } from './batch-flight.js';
import { fly, type FlightOutcome } from './flight.js';
import { cacheKey, type DeclaredParams } from './key.js';
import type { FailSafeReason, QueryOutcome, ShimMetrics } from './metrics.js';
import type { StatusBoard } from './status-board.js';
import { servedValue } from './value.js';

/**
 * The fail-safe query path (docs/failsafe.md): reuse a young value, else join or start
 * the one ClickHouse query for the key — admitted through the fair queue
 * (admission/), batched with other keys when the query declares `batch:` —
 * wait at most `deadline_ms`, and fall back per decision.ts. A query that
 * outlives the deadline keeps running and refreshes the cache when it lands.
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
  /**
   * Caps on ClickHouse queries in flight and the bound of the queue waiting for
   * them (docs/failsafe.md#admission); config resolves the defaults per backend.
   */
  readonly admission: AdmissionLimits;
  /** Give-up and batch-window timers (tests fire them by hand). Default: real ones. */
  readonly timers?: Timers;
}

interface CacheEntry extends GoodValue {
  readonly query: string;
}

interface Flight {
  readonly promise: Promise<KeyOutcome>;
  /** Set once its ClickHouse query (or its batch's) has a slot: a deadline before that is an overload. */
  readonly started: { value: boolean };
}

/** Not started: no admission slot came before the request's wait budget ran out. */
type Overload = { readonly kind: 'failed'; readonly reason: 'overload'; readonly message: string };
type KeyOutcome = FlightOutcome | Overload;

/** One key waiting in an open batch. */
interface BatchMember {
  readonly value: string;
  /** Monotonic ms by which the batch must have a slot for this key to be answered fresh. */
  readonly giveUpAtMs: number;
  readonly resolve: (outcome: KeyOutcome) => void;
  readonly onStart: () => void;
}

/** Failures of one key are logged at most this often. */
export const FAILURE_LOG_INTERVAL_MS = 60_000;

export class QueryExecutor {
  private readonly cache: LRUCache<string, CacheEntry>;
  private readonly inflight = new Map<string, Flight>();
  /** Bumped when a query changes or goes, so a flight of the old definition cannot write the cache. */
  private readonly epochs = new Map<string, number>();
  private readonly lastLoggedMs: LRUCache<string, number>;
  private readonly warnedNoHold = new Set<string>();
  private started = 0;
  private readonly admission: Admission;
  private readonly batches: BatchCollector<BatchMember>;

  constructor(private readonly options: ExecutorOptions) {
    const max = options.cacheMaxKeys ?? 10_000;
    this.cache = new LRUCache({ max });
    this.lastLoggedMs = new LRUCache({ max });
    this.admission = new Admission(options.admission, options.clock, options.timers);
    this.batches = new BatchCollector(options.clock, options.timers);
    options.metrics.admissionQueued = () => this.admission.queued;
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
    const arrivedMs = this.options.clock.monotonicMs();
    const flight = this.inflight.get(key) ?? this.launch(key, query, params);
    const left = query.deadlineMs - (this.options.clock.monotonicMs() - arrivedMs);
    let outcome = await settleWithin(flight.promise, Math.max(0, left));
    // Still waiting for a slot at the deadline (the give-up timer lost a race under load): not started, so overload.
    if (outcome.kind === 'deadline' && !flight.started.value) outcome = this.notStarted(query);
    if (outcome.kind === 'ok') return this.served(query, { source: 'fresh', value: outcome.value, ageSeconds: 0 });
    const reason: FailSafeReason = outcome.kind === 'deadline' ? 'deadline' : outcome.reason;
    const message = outcome.kind === 'deadline' ? `no answer within deadline_ms=${query.deadlineMs}; the query keeps running` : outcome.message;
    const answer = onFailure(this.cache.get(key), query, this.options.clock.nowMs(), hold);
    if (this.isLive(query)) this.options.metrics.failsafeAnswers.inc({ query: query.name, reason });
    this.logFailure(key, query, params, reason, message, answer);
    if (answer.source === 'last_good' && missedHold(query, hold)) this.warnNoHold(query);
    return this.served(query, answer);
  }

  private reuse(key: string, query: CompiledQuery): Answer | undefined {
    const reused = reusable(this.cache.get(key), query, this.options.clock.nowMs());
    return reused === undefined ? undefined : this.served(query, reused);
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

  /**
   * The key's flight, registered at once so later requests join it while it
   * waits for a slot or a batch: one ClickHouse query (or one share of a batch).
   */
  private launch(key: string, query: CompiledQuery, params: DeclaredParams): Flight {
    const epoch = this.epochs.get(query.name) ?? 0;
    const waitMs = waitBudgetMs(query.deadlineMs, 0);
    const started = { value: false };
    const onStart = () => (started.value = true);
    const run = isBatched(query) ? this.joinBatch(query, params, waitMs, onStart) : this.runSingle(query, params, waitMs, onStart);
    const promise = run.then((outcome) => {
      this.settleKey(key, query, epoch, outcome, flight);
      return outcome;
    });
    const flight: Flight = { promise, started };
    this.inflight.set(key, flight);
    return flight;
  }

  /** What a key's outcome does to the key: the cache (a good value of the current definition), status. */
  private settleKey(key: string, query: CompiledQuery, epoch: number, outcome: KeyOutcome, flight: Flight): void {
    const { metrics, status, clock } = this.options;
    if (this.inflight.get(key) === flight) this.inflight.delete(key);
    // Failures never write the cache; a flight of a since-changed definition neither.
    if (outcome.kind === 'ok' && (this.epochs.get(query.name) ?? 0) === epoch) {
      this.cache.set(key, { query: query.name, value: outcome.value, atMs: clock.nowMs() });
      metrics.cacheEntries.set(this.cache.size);
    }
    if (outcome.kind === 'failed' && outcome.reason !== 'overload' && this.isLive(query)) status.failed(query.name, outcome.reason, outcome.message);
  }

  private async runSingle(query: CompiledQuery, params: DeclaredParams, waitMs: number, onStart: () => void): Promise<KeyOutcome> {
    const ticket = await this.admit(query, waitMs);
    if (ticket.kind === 'refused') return this.overload(query, ticket);
    onStart();
    try {
      const { clickhouse } = this.options;
      const report = await this.counted(query, () => fly(clickhouse.client, query, params, { afterError: clickhouse.afterQueryError }));
      return report.outcome;
    } finally {
      ticket.release();
    }
  }

  private joinBatch(query: BatchedQuery, params: DeclaredParams, waitMs: number, onStart: () => void): Promise<KeyOutcome> {
    const { param, maxSize, windowMs } = query.batch;
    const value = params[param] ?? '';
    const fixed = Object.fromEntries(Object.entries(params).filter(([name]) => name !== param));
    // One open batch per definition and per value of the other params.
    const group = JSON.stringify([query.name, query.fingerprint, Object.entries(fixed).sort()]);
    const policy: BatchPolicy = { maxSize, windowMs, maxOpenMs: query.deadlineMs / 4 };
    const giveUpAtMs = this.options.clock.monotonicMs() + waitMs;
    return new Promise((resolve) => {
      this.batches.join(group, { value, giveUpAtMs, resolve, onStart }, policy, (members) => void this.runBatch(query, fixed, members));
    });
  }

  /** One ClickHouse query for a closed batch; each member gets its own key's outcome. */
  private async runBatch(query: BatchedQuery, fixed: DeclaredParams, members: readonly BatchMember[]): Promise<void> {
    const giveUpAtMs = Math.min(...members.map((m) => m.giveUpAtMs));
    const ticket = await this.admit(query, giveUpAtMs - this.options.clock.monotonicMs());
    if (ticket.kind === 'refused') {
      const overload = this.overload(query, ticket);
      for (const member of members) member.resolve(overload);
      return;
    }
    for (const member of members) member.onStart();
    const values = [...new Set(members.map((m) => m.value))];
    let report: BatchReport;
    try {
      if (this.isLive(query)) this.options.metrics.batchSize.observe({ query: query.name }, values.length);
      const { clickhouse } = this.options;
      report = await this.counted(query, () => flyBatch(clickhouse.client, query, values, fixed, { afterError: clickhouse.afterQueryError }));
    } finally {
      ticket.release();
    }
    const lost: FlightOutcome = { kind: 'failed', reason: 'bad_result', message: 'batch: no outcome for this key' };
    for (const member of members) member.resolve(report.outcomes.get(member.value) ?? lost);
  }

  /** A slot for one ClickHouse query of `query`, waiting at most `waitMs`; the wait is observed. */
  private async admit(query: CompiledQuery, waitMs: number): Promise<Ticket> {
    const ticket = await this.admission.acquire(query.name, waitMs);
    if (this.isLive(query)) {
      const outcome = ticket.kind === 'admitted' ? 'started' : 'overload';
      this.options.metrics.admissionWait.observe({ query: query.name, outcome }, ticket.waitedMs / 1000);
    }
    return ticket;
  }

  /** Runs one admitted ClickHouse query: the started count, the in-flight gauge and the duration histogram. */
  private async counted<R extends { readonly durationSeconds: number } & ({ readonly outcome: FlightOutcome } | { readonly queryOutcome: QueryOutcome })>(
    query: CompiledQuery,
    run: () => Promise<R>,
  ): Promise<R> {
    const { metrics } = this.options;
    this.started += 1;
    metrics.inflight.inc();
    let report: R;
    try {
      report = await run();
    } finally {
      metrics.inflight.dec();
    }
    if (this.isLive(query)) {
      const outcome = 'queryOutcome' in report ? report.queryOutcome : report.outcome.kind === 'ok' ? 'success' : report.outcome.reason;
      metrics.queryDuration.observe({ query: query.name, outcome }, report.durationSeconds);
    }
    return report;
  }

  private notStarted(query: CompiledQuery): Overload {
    return { kind: 'failed', reason: 'overload', message: `not started within deadline_ms=${query.deadlineMs} (${this.admission.describe(query.name)}; slow or stalled answers)` };
  }

  private overload(query: CompiledQuery, ticket: Extract<Ticket, { kind: 'refused' }>): Overload {
    const why = ticket.why === 'queue_full' ? 'the admission queue is full' : `no slot within ${Math.round(ticket.waitedMs)} ms`;
    return { kind: 'failed', reason: 'overload', message: `not started: ${why} (${this.admission.describe(query.name)}; slow or stalled answers)` };
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

function isBatched(query: CompiledQuery): query is BatchedQuery {
  return query.batch !== undefined;
}

type Settled = KeyOutcome | { readonly kind: 'deadline' };

/** The flight's outcome, or `deadline` if it has not settled within `deadlineMs` (the flight goes on). */
async function settleWithin(promise: Promise<KeyOutcome>, deadlineMs: number): Promise<Settled> {
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
