import { LRUCache } from 'lru-cache';
import type { CompiledQuery } from '../catalogue/types.js';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { withSpan, type Span } from '../telemetry/trace.js';
import { pollSpan, traceAnswer, type CacheDecision } from './answer-trace.js';
import { missedHold, onFailure, reusable, type Answer, type GoodValue } from './decision.js';
import type { AdmissionLimits } from './admission/admission.js';
import { waitBudgetMs } from './admission/budget.js';
import type { Timers } from './admission/timers.js';
import { Dispatch, type KeyOutcome } from './dispatch.js';
import { cacheKey, type DeclaredParams } from './key.js';
import type { LastGood } from './last-good/last-good.js';
import { LastGoodStore } from './last-good/store.js';
import type { FailSafeReason, ShimMetrics } from './metrics.js';
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
  /** The client every flight runs on, and what to do after a failed query (the backend seam). */
  readonly clickhouse: Pick<ClickHouseHandle, 'client' | 'afterQueryError'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: ShimMetrics;
  readonly status: StatusBoard;
  /** Bound of the last-good cache (LRU), default 10 000 keys; ignored when `lastGood` is given. */
  readonly cacheMaxKeys?: number;
  /** The last-good cache with its snapshot and peers (last-good/); default: a bare store of cacheMaxKeys. */
  readonly lastGood?: Pick<LastGood, 'store' | 'fromPeers' | 'askPeersAhead'>;
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

interface Flight {
  readonly promise: Promise<KeyOutcome>;
  /** Set once its ClickHouse query (or its batch's) has a slot: a deadline before that is an overload. */
  readonly started: { value: boolean };
}

/** Failures of one key are logged at most this often. */
export const FAILURE_LOG_INTERVAL_MS = 60_000;

export class QueryExecutor {
  private readonly cache: LastGoodStore;
  private readonly inflight = new Map<string, Flight>();
  /** Bumped when a query changes or goes, so a flight of the old definition cannot write the cache. */
  private readonly epochs = new Map<string, number>();
  private readonly lastLoggedMs: LRUCache<string, number>;
  private readonly warnedNoHold = new Set<string>();
  private readonly dispatch: Dispatch;

  constructor(private readonly options: ExecutorOptions) {
    this.cache = options.lastGood?.store ?? new LastGoodStore(options.cacheMaxKeys);
    this.lastLoggedMs = new LRUCache({ max: this.cache.maxKeys });
    this.dispatch = new Dispatch({ ...options, isLive: (name) => options.isLive?.(name) ?? true });
  }

  /** ClickHouse queries started so far (tests and /status). */
  get queriesStarted(): number {
    return this.dispatch.started;
  }

  get cacheSize(): number {
    return this.cache.size;
  }

  /**
   * Step 1, synchronous: a young cached value, served (metrics, status); else steps 2–4 (`ask`).
   * The key is built once and looked up once; a cache hit is answered without a promise
   * (docs/performance.md). What every transport calls (serve.ts).
   */
  answerNowOrLater(query: CompiledQuery, params: DeclaredParams, hold: number | undefined): Answer | Promise<Answer> {
    const key = cacheKey(query.name, query.params, params);
    const entry = this.cache.get(key);
    return this.reuseEntry(entry, query) ?? this.ask(key, query, params, hold, entry !== undefined);
  }

  /**
   * Steps 2–4 for a key with no young value: join or start its flight, wait at most the deadline.
   * `held`: whether the cache has an (old) entry for the key, as the lookup just before found it.
   */
  private async ask(key: string, query: CompiledQuery, params: DeclaredParams, hold: number | undefined, held: boolean): Promise<Answer> {
    const poll = pollSpan();
    const arrivedMs = this.options.clock.monotonicMs();
    const joined = this.inflight.get(key);
    const flight = joined ?? this.launch(key, query, params, poll);
    const cancelPeers = held ? undefined : this.peersAhead(key, query, hold);
    const left = query.deadlineMs - (this.options.clock.monotonicMs() - arrivedMs);
    let outcome = await settleWithin(flight.promise, Math.max(0, left));
    cancelPeers?.();
    // Still waiting for a slot when the deadline fired (its give-up timer had not run yet): never started, so `overload`.
    if (outcome.kind === 'deadline' && !flight.started.value) outcome = this.dispatch.notStarted(query);
    const decision: CacheDecision = outcome.kind === 'failed' && outcome.reason === 'overload' ? 'refused' : joined !== undefined ? 'joined' : 'started';
    if (outcome.kind === 'ok') return this.traced(poll, query, decision, this.served(query, { source: 'fresh', value: outcome.value, ageSeconds: 0 }));
    const reason: FailSafeReason = outcome.kind === 'deadline' ? 'deadline' : outcome.reason;
    const message = outcome.kind === 'deadline' ? `no answer within deadline_ms=${query.deadlineMs}; the query keeps running` : outcome.message;
    const entry = this.cache.get(key) ?? (await this.fromPeers(key, query, hold, arrivedMs));
    const answer = onFailure(entry, query, this.options.clock.nowMs(), hold);
    if (this.isLive(query)) this.options.metrics.failsafeAnswers.inc({ query: query.name, reason });
    // Under the poll's span again, so the line carries its trace_id.
    withSpan(poll, () => this.logFailure(key, query, params, reason, message, answer));
    if (answer.source === 'last_good' && missedHold(query, hold)) this.warnNoHold(query);
    return this.traced(poll, query, decision, this.served(query, answer), reason);
  }

  private reuseEntry(entry: GoodValue | undefined, query: CompiledQuery): Answer | undefined {
    // One clock reading for the decision and the status board: this runs on every cached answer.
    const nowMs = this.options.clock.nowMs();
    const reused = reusable(entry, query, nowMs);
    return reused === undefined ? undefined : this.traced(pollSpan(), query, 'young', this.served(query, reused, nowMs));
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
    this.cache.dropQueries(gone);
    for (const key of this.inflight.keys()) if (gone.has(queryOfKey(key))) this.inflight.delete(key);
    this.options.metrics.cacheEntries.set(this.cache.size);
  }

  /**
   * The key's flight, registered at once so later requests join it while it
   * waits for a slot or a batch: one ClickHouse query (or one share of a batch).
   */
  private launch(key: string, query: CompiledQuery, params: DeclaredParams, poll: Span | undefined): Flight {
    const epoch = this.epochs.get(query.name) ?? 0;
    const waitMs = waitBudgetMs(query.deadlineMs, 0);
    const started = { value: false };
    const onStart = () => (started.value = true);
    const run = this.dispatch.run(query, params, waitMs, onStart, poll);
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
    const { status, clock } = this.options;
    if (this.inflight.get(key) === flight) this.inflight.delete(key);
    // Failures never write the cache; a flight of a since-changed definition neither.
    if (outcome.kind === 'ok' && (this.epochs.get(query.name) ?? 0) === epoch) {
      // No cache_entries update here: /metrics reads the cache's size at each scrape (routes/metrics.ts).
      this.cache.set(key, { query: query.name, fingerprint: query.fingerprint, value: outcome.value, atMs: clock.nowMs() });
    }
    if (outcome.kind === 'failed' && outcome.reason !== 'overload' && this.isLive(query)) status.failed(query.name, outcome.reason, outcome.message);
  }

  /**
   * A cold key on the failure path: the peer replicas' entry, within what is
   * left of the deadline (docs/failsafe.md#snapshot-and-peers). Not asked when
   * `hold` answers anyway.
   */
  private async fromPeers(key: string, query: CompiledQuery, hold: number | undefined, startedMs: number): Promise<GoodValue | undefined> {
    const lastGood = this.options.lastGood;
    if (lastGood === undefined || (query.metricType === 'Value' && hold !== undefined)) return undefined;
    const entry = await lastGood.fromPeers(query, key, query.deadlineMs - (this.options.clock.monotonicMs() - startedMs));
    if (entry !== undefined) this.options.metrics.cacheEntries.set(this.cache.size);
    return entry;
  }

  /** A cold key (none in the cache) waiting on its query: the peers are asked before the deadline runs out (last-good/last-good.ts). */
  private peersAhead(key: string, query: CompiledQuery, hold: number | undefined): (() => void) | undefined {
    const lastGood = this.options.lastGood;
    if (lastGood === undefined || (query.metricType === 'Value' && hold !== undefined)) return undefined;
    return lastGood.askPeersAhead(query, key);
  }

  private isLive(query: CompiledQuery): boolean {
    return this.options.isLive?.(query.name) ?? true;
  }

  /** `nowMs`: the clock reading the answer was decided on, when the caller has one. */
  private served(query: CompiledQuery, answer: Answer, nowMs?: number): Answer {
    const { metrics, status, clock } = this.options;
    const live = this.isLive(query);
    if (live) metrics.served(query.name, answer.source, answer.ageSeconds);
    if (answer.source === 'stale') return answer;
    const value = servedValue(answer.value);
    if (live) status.served(query.name, answer.source, value, (nowMs ?? clock.nowMs()) - answer.ageSeconds * 1000);
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

type Settled = KeyOutcome | { readonly kind: 'deadline' };

const DEADLINE: Settled = Object.freeze({ kind: 'deadline' });

/**
 * The flight's outcome, or `deadline` if it has not settled within `deadlineMs` (the flight goes on).
 * One promise and one timer: no race of two promises (this runs on every fresh answer).
 */
function settleWithin(promise: Promise<KeyOutcome>, deadlineMs: number): Promise<Settled> {
  return new Promise<Settled>((resolve, reject) => {
    const timer = setTimeout(() => resolve(DEADLINE), deadlineMs);
    promise.then(
      (outcome) => {
        clearTimeout(timer);
        resolve(outcome);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err as Error);
      },
    );
  });
}
