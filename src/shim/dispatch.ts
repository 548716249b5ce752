import type { CompiledQuery } from '../catalogue/types.js';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import type { Clock } from '../clock.js';
import { Admission, type AdmissionLimits, type Ticket } from './admission/admission.js';
import { BatchCollector, type BatchPolicy } from './admission/batches.js';
import type { Timers } from './admission/timers.js';
import { withSpan, type Span } from '../telemetry/trace.js';
import { flyBatch, type BatchedQuery, type BatchReport } from './batch-flight.js';
import { fly, type FlightOutcome } from './flight.js';
import type { DeclaredParams } from './key.js';
import type { QueryOutcome, ShimMetrics } from './metrics.js';

/**
 * How a key's ClickHouse query runs (docs/failsafe.md#admission): it waits for
 * an admission slot, then runs alone or as its share of a batch
 * (docs/catalogue.md#batch). It settles to the key's outcome and never rejects;
 * the cache and the fail-safe answer are the executor's.
 */
export interface DispatchOptions {
  /** Read at every query start, so a swapped client is picked up. */
  readonly clickhouse: Pick<ClickHouseHandle, 'client' | 'afterQueryError'>;
  readonly clock: Clock;
  readonly metrics: ShimMetrics;
  readonly admission: AdmissionLimits;
  readonly timers?: Timers | undefined;
  /** Whether the live catalogue still has the query (metrics of a removed one are not recorded). */
  readonly isLive: (queryName: string) => boolean;
}

/** Not started: no admission slot came before the request's wait budget ran out. */
export type Overload = { readonly kind: 'failed'; readonly reason: 'overload'; readonly message: string };
export type KeyOutcome = FlightOutcome | Overload;

/** One key waiting in an open batch. */
interface BatchMember {
  readonly value: string;
  /** Monotonic ms by which the batch must have a slot for this key to be answered fresh. */
  readonly giveUpAtMs: number;
  readonly resolve: (outcome: KeyOutcome) => void;
  readonly onStart: () => void;
  /** The poll span that asked (src/shim/answer-trace.ts); the batch's query span is the first member's child. */
  readonly parent: Span | undefined;
}

interface BatchShape {
  readonly policy: BatchPolicy;
  /** The group of a key whose only param is the batched one. */
  readonly loneGroup: string;
}

const NO_PARAMS: DeclaredParams = Object.freeze({});

export class Dispatch {
  /** ClickHouse queries started so far. */
  started = 0;
  /** ClickHouse queries started and not settled (the in-flight gauge reads it at a scrape). */
  private running = 0;
  private readonly admission: Admission;
  private readonly batches: BatchCollector<BatchMember>;
  /** Per compiled query (replaced on reload, so a WeakMap). */
  private readonly shapes = new WeakMap<BatchedQuery, BatchShape>();

  constructor(private readonly options: DispatchOptions) {
    this.admission = new Admission(options.admission, options.clock, options.timers);
    this.batches = new BatchCollector(options.clock, options.timers);
    options.metrics.admissionQueued = () => this.admission.queued;
    options.metrics.inflightQueries = () => this.running;
  }

  /**
   * The key's outcome: waits at most `waitMs` for a slot; `onStart` once its query (or batch) has one.
   * `parent`: the poll span its ClickHouse span belongs under (the wait loses the synchronous context).
   */
  run(query: CompiledQuery, params: DeclaredParams, waitMs: number, onStart: () => void, parent?: Span): Promise<KeyOutcome> {
    return isBatched(query) ? this.joinBatch(query, params, waitMs, onStart, parent) : this.runSingle(query, params, waitMs, onStart, parent);
  }

  /** A key whose query had no slot by its deadline. */
  notStarted(query: CompiledQuery): Overload {
    return { kind: 'failed', reason: 'overload', message: `not started within deadline_ms=${query.deadlineMs} (${this.admission.describe(query.name)}; slow or stalled answers)` };
  }

  private async runSingle(query: CompiledQuery, params: DeclaredParams, waitMs: number, onStart: () => void, parent: Span | undefined): Promise<KeyOutcome> {
    const admitted = this.admit(query, waitMs);
    const ticket = admitted instanceof Promise ? await admitted : admitted;
    if (ticket.kind === 'refused') {
      this.observeWait(query, ticket);
      return this.overload(query, ticket);
    }
    try {
      const { clickhouse } = this.options;
      const report = this.counted(query, () => withSpan(parent, () => fly(clickhouse.client, query, params, { afterError: clickhouse.afterQueryError })));
      // Bookkeeping after the call, as in runBatch.
      this.observeWait(query, ticket);
      onStart();
      return (await report).outcome;
    } finally {
      ticket.release();
    }
  }

  private joinBatch(query: BatchedQuery, params: DeclaredParams, waitMs: number, onStart: () => void, parent: Span | undefined): Promise<KeyOutcome> {
    const { param } = query.batch;
    const value = params[param] ?? '';
    const fixed = query.params.length === 1 && query.params[0] === param ? NO_PARAMS : Object.fromEntries(Object.entries(params).filter(([name]) => name !== param));
    // One open batch per definition and per value of the other params.
    const group = fixed === NO_PARAMS ? this.shapeOf(query).loneGroup : JSON.stringify([query.name, query.fingerprint, Object.entries(fixed).sort()]);
    const { policy } = this.shapeOf(query);
    const giveUpAtMs = this.options.clock.monotonicMs() + waitMs;
    return new Promise((resolve) => {
      this.batches.join(group, { value, giveUpAtMs, resolve, onStart, parent }, policy, (members) => this.runBatch(query, fixed, members));
    });
  }

  /** The batch policy and (with no other params) the group of a compiled query, built once. */
  private shapeOf(query: BatchedQuery): BatchShape {
    let shape = this.shapes.get(query);
    if (shape === undefined) {
      const { maxSize, windowMs } = query.batch;
      shape = { policy: { maxSize, windowMs, maxOpenMs: query.deadlineMs / 4 }, loneGroup: JSON.stringify([query.name, query.fingerprint, []]) };
      this.shapes.set(query, shape);
    }
    return shape;
  }

  /** One ClickHouse query for a closed batch; each member gets its own key's outcome. */
  private async runBatch(query: BatchedQuery, fixed: DeclaredParams, members: readonly BatchMember[]): Promise<void> {
    let giveUpAtMs = Infinity;
    for (const member of members) giveUpAtMs = Math.min(giveUpAtMs, member.giveUpAtMs);
    const admitted = this.admit(query, giveUpAtMs - this.options.clock.monotonicMs());
    const ticket = admitted instanceof Promise ? await admitted : admitted;
    if (ticket.kind === 'refused') {
      this.observeWait(query, ticket);
      const overload = this.overload(query, ticket);
      for (const member of members) member.resolve(overload);
      return;
    }
    const values = members.length === 1 && members[0] !== undefined ? [members[0].value] : [...new Set(members.map((m) => m.value))];
    let outcomes: ReadonlyMap<string, FlightOutcome>;
    try {
      // The query first, the bookkeeping after: the client library sends a query only after a
      // timer of its own (setTimeout 0), so what runs here before this turn ends does not delay
      // it (docs/performance.md#the-shim-in-its-own-process). Nothing reads `started` before then.
      const flown = this.flyValues(query, fixed, values, members[0]?.parent);
      this.observeWait(query, ticket);
      for (const member of members) member.onStart();
      if (this.isLive(query)) this.options.metrics.batchSize.observe({ query: query.name }, values.length);
      outcomes = await flown;
    } finally {
      ticket.release();
    }
    const lost: FlightOutcome = { kind: 'failed', reason: 'bad_result', message: 'batch: no outcome for this key' };
    for (const member of members) member.resolve(outcomes.get(member.value) ?? lost);
  }

  /**
   * A batch of one key runs the one-by-one SQL: the query the key runs without a batch form
   * (test/pressure/batch-parity.test.ts holds the two equal), so a lone poll costs no more than it.
   */
  private async flyValues(query: BatchedQuery, fixed: DeclaredParams, values: readonly string[], parent: Span | undefined): Promise<ReadonlyMap<string, FlightOutcome>> {
    const { clickhouse } = this.options;
    const options = { afterError: clickhouse.afterQueryError };
    const [only] = values;
    if (values.length === 1 && only !== undefined) {
      const params = { ...fixed, [query.batch.param]: only };
      const report = await this.counted(query, () => withSpan(parent, () => fly(clickhouse.client, query, params, options)));
      return new Map<string, FlightOutcome>().set(only, report.outcome);
    }
    const report: BatchReport = await this.counted(query, () => withSpan(parent, () => flyBatch(clickhouse.client, query, values, fixed, options)));
    return report.outcomes;
  }

  /** A slot for one ClickHouse query of `query`, waiting at most `waitMs` (the caller observes the wait). No promise when a slot is free now. */
  private admit(query: CompiledQuery, waitMs: number): Ticket | Promise<Ticket> {
    return this.admission.tryAcquire(query.name) ?? this.admission.acquire(query.name, waitMs);
  }

  private observeWait(query: CompiledQuery, ticket: Ticket): void {
    if (this.isLive(query)) {
      const outcome = ticket.kind === 'admitted' ? 'started' : 'overload';
      this.options.metrics.admissionWait.observe({ query: query.name, outcome }, ticket.waitedMs / 1000);
    }
  }

  /** Runs one admitted ClickHouse query: the started count, the in-flight count and the duration histogram. */
  private async counted<R extends { readonly durationSeconds: number } & ({ readonly outcome: FlightOutcome } | { readonly queryOutcome: QueryOutcome })>(
    query: CompiledQuery,
    run: () => Promise<R>,
  ): Promise<R> {
    const { metrics } = this.options;
    this.started += 1;
    this.running += 1;
    let report: R;
    try {
      report = await run();
    } finally {
      this.running -= 1;
    }
    if (this.isLive(query)) {
      const outcome = 'queryOutcome' in report ? report.queryOutcome : report.outcome.kind === 'ok' ? 'success' : report.outcome.reason;
      metrics.queryDuration.observe({ query: query.name, outcome }, report.durationSeconds);
    }
    return report;
  }

  private overload(query: CompiledQuery, ticket: Extract<Ticket, { kind: 'refused' }>): Overload {
    const why = ticket.why === 'queue_full' ? 'the admission queue is full' : `no slot within ${Math.round(ticket.waitedMs)} ms`;
    return { kind: 'failed', reason: 'overload', message: `not started: ${why} (${this.admission.describe(query.name)}; slow or stalled answers)` };
  }

  private isLive(query: CompiledQuery): boolean {
    return this.options.isLive(query.name);
  }
}

function isBatched(query: CompiledQuery): query is BatchedQuery {
  return query.batch !== undefined;
}
