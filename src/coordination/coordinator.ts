import type { ClickHouseClient } from '@clickhouse/client';
import { qualifiedTable } from '../clickhouse/identifiers.js';
import { setTimeout as delay } from 'node:timers/promises';
import { dueRowsSql, dueTickSql, type DueRow, type DueTickRow } from './due-sql.js';
import { withQuorumRetry } from './quorum-retry.js';
import type { CoordinationSettings } from './topology.js';
import { ServerTime } from './server-clock.js';
import type { TickSnapshot } from '../schedule/plan.js';
import type { RunWindow } from '../schedule/window.js';
import { systemClock } from '../clock.js';
import { DfeError } from '../errors.js';
import { RUN_STATUS, TABLES } from './tables.js';

export type { TickSnapshot };

/**
 * The runner's reads and writes of the coordination tables (docs/tables.md, docs/runner.md#a-tick),
 * kept thin: one method, one statement. Reads carry the topology's read
 * settings and writes its write settings (quorum on replicated tables), so a
 * claim's read-back sees every competing claim.
 *
 * Values travel as bound parameters (`{name:Type}`) or, for plain rows, as
 * JSONEachRow data — never spliced into SQL. Sharp edge of the embedded backend:
 * chdb runs parameter-bound queries one at a time PROCESS-WIDE, so rows that
 * need no SQL condition are written as data to keep that queue short.
 */
export interface LeaseRow {
  readonly owner: string;
  readonly fire: number;
  readonly leaseUntil: number;
  /** DateTime64(3) text as the server renders it; equal text = a tie. */
  readonly claimed: string;
}

/** hunt_run's cost columns of a finished run; 0 = not known. */
export interface RunRowCost {
  readonly durationMs: number;
  readonly cpuUs: number;
  readonly memoryBytes: number;
  /** ClickHouse's error code of a failed run (241 = MEMORY_LIMIT_EXCEEDED), else 0. */
  readonly errorCode: number;
}

export type RunStatus = (typeof RUN_STATUS)[keyof typeof RUN_STATUS];

/** One due fire as `dfe-hunt-runner due` shows it. */
export interface DueFire {
  readonly huntId: string;
  readonly fire: number;
  /** A run-now request. */
  readonly requested: boolean;
  readonly serverNow: number;
}

const SERVER_NOW = 'toInt64(toUnixTimestamp(now()))';
type Num = number | string;
type RawLease = { owner: string; fire: Num; lease_until: Num; claimed_text: string };

/** The `(hunt_id, fire)` pairs of `{hunts}` and `{fires}`, one row each, as a subquery. */
const HUNT_FIRES = `(
         SELECT tupleElement(hf, 1) AS hunt_id, tupleElement(hf, 2) AS fire
         FROM (SELECT arrayJoin(arrayZip({hunts:Array(String)}, {fires:Array(Int64)})) AS hf)
       )`;

/**
 * Each of `{hunts}` whose newest lease row is ONE row of `{owner}` (no tie with another owner or
 * fire), with that row's fire as `top_fire`: where this owner may write next (docs/claim-protocol.md#the-window-chain-in-the-table-protocol).
 * `having`: a further condition on the newest row(s).
 */
const ownNewestSql = (lease: string, having = ''): string =>
  `SELECT hunt_id, any(fire) AS top_fire FROM ${lease}
       WHERE hunt_id IN {hunts:Array(String)}
         AND (hunt_id, claimed) IN (SELECT hunt_id, max(claimed) FROM ${lease} WHERE hunt_id IN {hunts:Array(String)} GROUP BY hunt_id)
       GROUP BY hunt_id
       HAVING uniqExact(owner, fire) = 1 AND any(owner) = {owner:String}${having}`;

const toLease = (r: RawLease): LeaseRow => ({ owner: r.owner, fire: Number(r.fire), leaseUntil: Number(r.lease_until), claimed: r.claimed_text });

export class Coordinator {
  private readonly lease: string;
  private readonly watermarkTable: string;

  constructor(
    readonly client: ClickHouseClient,
    readonly database: string,
    readonly settings: CoordinationSettings,
    readonly time: ServerTime = new ServerTime({ kind: 'server' }, systemClock),
    private readonly signal?: AbortSignal,
  ) {
    this.lease = qualifiedTable(database, TABLES.lease);
    this.watermarkTable = qualifiedTable(database, TABLES.watermark);
  }

  /** The same coordinator on another connection (an embedded session runs one query at a time). */
  withClient(client: ClickHouseClient): Coordinator {
    return client === this.client ? this : new Coordinator(client, this.database, this.settings, this.time, this.signal);
  }

  /** The coordination clock in SQL: the server's `now()`, or `{now:Int64}` bound by `params` (clock mode). */
  get now(): string {
    return this.time.time.kind === 'server' ? SERVER_NOW : '{now:Int64}';
  }

  /** Query parameters plus `now` where the coordination clock is the injected one. */
  params(values: Record<string, unknown>): Record<string, unknown> {
    const now = this.time.time.kind === 'clock' ? this.time.nowSeconds() : undefined;
    return now === undefined ? values : { ...values, now };
  }

  /** The runner stopped like a crash: nothing more is written. */
  get aborted(): boolean {
    return this.signal?.aborted === true;
  }

  /** The runner's abort signal, for every call on its connections. */
  get abort() {
    return this.signal ? { abort_signal: this.signal } : {};
  }

  private async read<T>(query: string, values: Record<string, unknown>): Promise<T[]> {
    const rs = await this.client.query({
      query,
      query_params: this.params(values),
      format: 'JSONEachRow',
      clickhouse_settings: this.settings.read,
      ...this.abort,
    });
    return rs.json<T>();
  }

  /**
   * Write settings, plus the two a hunt run sets on its session: on the embedded
   * backend a session keeps settings between queries (chdb applies them with
   * SET), and a coordination row must not carry a hunt's log_comment or dedup
   * token. Empty is their default, so this is harmless on a server.
   */
  private get writeSettings() {
    return { ...this.settings.write, log_comment: '', insert_deduplication_token: '' };
  }

  /** Quorum-busy rejections (replicated tables, concurrent writers) are retried: see quorum-retry.ts. */
  private async write(query: string, values: Record<string, unknown>): Promise<void> {
    await withQuorumRetry(
      () => this.client.command({ query, query_params: this.params(values), clickhouse_settings: this.writeSettings, ...this.abort }),
      (ms) => delay(ms),
    );
  }

  private async insertRows(table: string, columns: readonly string[], rows: ReadonlyArray<Record<string, unknown>>): Promise<void> {
    await withQuorumRetry(
      () =>
        this.client.insert({
          table: qualifiedTable(this.database, table),
          values: [...rows],
          columns: [...columns] as [string, ...string[]],
          format: 'JSONEachRow',
          clickhouse_settings: this.writeSettings,
          ...this.abort,
        }),
      (ms) => delay(ms),
    );
  }

  /** docs/runner.md#a-tick step 1: the one due query of a tick; also refreshes the server clock estimate. */
  async tick(): Promise<TickSnapshot> {
    const sql = dueTickSql(this.database, { now: this.time.time.kind === 'server' ? 'server' : 'param' });
    const [row] = await this.read<DueTickRow>(sql, {});
    if (!row) throw new DfeError('CLICKHOUSE_FAILED', 'the due query returned no row');
    const serverNow = Number(row.server_now);
    this.time.observe(serverNow);
    return {
      serverNow,
      backlog: Number(row.backlog),
      due: row.due.map(([huntId, fire, requested, interval, offset, owedFrom]) => ({
        huntId,
        fire: Number(fire),
        requested: Number(requested) === 1,
        intervalSeconds: Number(interval),
        phaseOffset: Number(offset),
        owedFrom: Number(owedFrom),
      })),
    };
  }

  async heartbeat(runnerId: string, pollSeconds: number): Promise<void> {
    const seen = this.time.nowSeconds();
    if (seen === undefined) return; // before the first clock reading; the next tick writes it
    await this.insertRows(TABLES.heartbeat, ['runner_id', 'seen', 'poll_seconds'], [{ runner_id: runnerId, seen, poll_seconds: pollSeconds }]);
  }

  /** The free read: each hunt's newest lease row, and the clock they were read at. */
  async newestLeases(huntIds: readonly string[]): Promise<{ rows: Map<string, LeaseRow>; nowSeconds: number }> {
    const raw = await this.read<RawLease & { hunt_id: string; now_s: Num }>(
      `SELECT hunt_id, owner, fire, lease_until, toString(claimed) AS claimed_text, ${this.now} AS now_s FROM ${this.lease}
       WHERE hunt_id IN {hunts:Array(String)}
       ORDER BY hunt_id, claimed DESC, owner ASC LIMIT 1 BY hunt_id`,
      { hunts: huntIds },
    );
    const rows = new Map(raw.map((r) => [r.hunt_id, toLease(r)]));
    return { rows, nowSeconds: raw[0] === undefined ? Number.NEGATIVE_INFINITY : Number(raw[0].now_s) };
  }

  /**
   * docs/claim-protocol.md#the-claim, the conditional insert, for several hunts at once: a lease
   * row for (owner, fire) of each hunt whose newest lease row is not live. A live
   * row of this same owner blocks too: it can only be a late claim of ours (or a
   * crashed predecessor with our id), which may hide a winner a merge dropped.
   */
  async conditionalClaims(
    owner: string,
    claims: ReadonlyArray<{ huntId: string; fire: number }>,
    leaseSeconds: number,
    options: { readonly chain?: boolean } = {},
  ): Promise<void> {
    // The window chain (docs/claim-protocol.md#the-table-protocol): while the newest lease row's
    // fire is past the watermark, that fire is still owed and is the one claimed (a retake of the
    // same window), whatever fire the claimant planned. Chosen in the statement that inserts.
    const fire = options.chain
      ? `if(p.has_row = 1 AND (w.has_wm = 0 OR p.fire > w.wm), p.fire, c.fire)`
      : 'c.fire';
    const joins = options.chain
      ? `LEFT JOIN (
           SELECT hunt_id, fire, toUInt8(1) AS has_row FROM ${this.lease} WHERE hunt_id IN {hunts:Array(String)}
           ORDER BY hunt_id, claimed DESC, owner ASC LIMIT 1 BY hunt_id
         ) AS p ON p.hunt_id = c.hunt_id
         LEFT JOIN (
           SELECT hunt_id, argMax(watermark, updated) AS wm, toUInt8(1) AS has_wm FROM ${this.watermarkTable}
           WHERE hunt_id IN {hunts:Array(String)} GROUP BY hunt_id
         ) AS w ON w.hunt_id = c.hunt_id`
      : '';
    await this.write(
      `INSERT INTO ${this.lease} (hunt_id, owner, fire, lease_until, claimed)
       SELECT c.hunt_id, {owner:String}, ${fire}, ${this.now} + {lease:Int64}, now64(3)
       FROM ${HUNT_FIRES} AS c
       ${joins}
       WHERE c.hunt_id NOT IN (
         SELECT hunt_id FROM (
           SELECT hunt_id, lease_until FROM ${this.lease} WHERE hunt_id IN {hunts:Array(String)}
           ORDER BY hunt_id, claimed DESC, owner ASC LIMIT 1 BY hunt_id
         ) WHERE lease_until > ${this.now}
       )`,
      { owner, hunts: claims.map((c) => c.huntId), fires: claims.map((c) => c.fire), lease: leaseSeconds },
    );
  }

  /**
   * The read-back of several hunts: each one's two newest lease rows (to see a
   * tie) and, in the same query, its watermark for the already-run recheck
   * (docs/runner.md#a-tick, step 4).
   */
  async readBacks(huntIds: readonly string[]): Promise<Map<string, { rows: LeaseRow[]; watermark: number | null }>> {
    const raw = await this.read<RawLease & { hunt_id: string; wm_n: Num; wm: Num }>(
      `SELECT l.hunt_id AS hunt_id, l.owner AS owner, l.fire AS fire, l.lease_until AS lease_until,
              l.claimed_text AS claimed_text, w.n AS wm_n, w.wm AS wm
       FROM (
         SELECT hunt_id, owner, fire, lease_until, claimed, toString(claimed) AS claimed_text FROM ${this.lease}
         WHERE hunt_id IN {hunts:Array(String)}
         ORDER BY hunt_id, claimed DESC, owner ASC LIMIT 2 BY hunt_id
       ) AS l
       LEFT JOIN (
         SELECT hunt_id, count() AS n, argMax(watermark, updated) AS wm FROM ${this.watermarkTable}
         WHERE hunt_id IN {hunts:Array(String)} GROUP BY hunt_id
       ) AS w ON w.hunt_id = l.hunt_id
       ORDER BY l.hunt_id, l.claimed DESC, l.owner ASC`,
      { hunts: huntIds },
    );
    const out = new Map<string, { rows: LeaseRow[]; watermark: number | null }>();
    for (const r of raw) {
      const entry = out.get(r.hunt_id) ?? { rows: [], watermark: Number(r.wm_n) > 0 ? Number(r.wm) : null };
      entry.rows.push(toLease(r));
      out.set(r.hunt_id, entry);
    }
    return out;
  }

  /**
   * A fresh lease row for a run in progress (renewal), or lease_until 0
   * (release). Plain data: a renewal's lease_until comes from the server clock
   * estimate (see server-clock.ts), so it never waits in chdb's parameter queue
   * behind a long hunt statement.
   */
  async putLease(huntId: string, owner: string, fire: number, leaseSeconds: number | 'release'): Promise<void> {
    let leaseUntil = 0;
    if (leaseSeconds !== 'release') {
      const now = this.time.nowSeconds();
      if (now === undefined) throw new DfeError('CLICKHOUSE_FAILED', 'no ClickHouse clock reading yet');
      leaseUntil = now + leaseSeconds;
    }
    await this.insertRows(TABLES.lease, ['hunt_id', 'owner', 'fire', 'lease_until'], [{ hunt_id: huntId, owner, fire, lease_until: leaseUntil }]);
  }

  /**
   * The table protocol's own writes after a claim (docs/claim-protocol.md#the-window-chain-in-the-table-protocol):
   * a fresh lease row for each (hunt, fire), or lease_until 0 (release), written only where the
   * hunt's newest lease row is this owner's row of that fire, with no tie — decided in the statement
   * that inserts, so a runner that lost its hunt (paused past its lease, taken over) never puts a
   * row over the taker's, whatever the timing between its steps.
   */
  async putLeasesIfNewest(owner: string, held: ReadonlyArray<{ huntId: string; fire: number }>, leaseSeconds: number | 'release'): Promise<void> {
    if (held.length === 0) return;
    const until = leaseSeconds === 'release' ? 'toInt64(0)' : `${this.now} + {lease:Int64}`;
    await this.write(
      `INSERT INTO ${this.lease} (hunt_id, owner, fire, lease_until)
       SELECT c.hunt_id, {owner:String}, c.fire, ${until}
       FROM ${HUNT_FIRES} AS c
       WHERE (c.hunt_id, c.fire) IN (SELECT hunt_id, top_fire FROM (${ownNewestSql(this.lease)}))`,
      { owner, hunts: held.map((h) => h.huntId), fires: held.map((h) => h.fire), ...(leaseSeconds === 'release' ? {} : { lease: leaseSeconds }) },
    );
  }

  /**
   * Releases a late claim (docs/claim-protocol.md#the-claim): for each hunt whose newest lease row
   * is live and this owner's (no tie), a row of the same fire with lease_until 0 — so the hunt is
   * free at once and the chain keeps that row's fire. Never a DELETE: the table keeps only the
   * newest row of a hunt once it merges, so deleting the newest can leave no row at all and lose
   * the fire of the window in flight.
   */
  async releaseOwnNewest(owner: string, huntIds: readonly string[]): Promise<void> {
    if (huntIds.length === 0) return;
    await this.write(
      `INSERT INTO ${this.lease} (hunt_id, owner, fire, lease_until)
       SELECT hunt_id, {owner:String}, top_fire, toInt64(0) FROM (${ownNewestSql(this.lease, ' AND max(lease_until) > 0')})`,
      { owner, hunts: huntIds },
    );
  }

  /** Each hunt's newest watermark (hunts without one are absent). */
  async watermarks(huntIds: readonly string[]): Promise<Map<string, number>> {
    const raw = await this.read<{ hunt_id: string; wm: Num }>(
      `SELECT hunt_id, argMax(watermark, updated) AS wm FROM ${this.watermarkTable} WHERE hunt_id IN {hunts:Array(String)} GROUP BY hunt_id`,
      { hunts: huntIds },
    );
    return new Map(raw.map((r) => [r.hunt_id, Number(r.wm)]));
  }

  /**
   * The commit of a run: watermark := fire, only if that moves it forward. Fenced in the
   * statement itself, so a stale run that finishes after a later one committed never moves
   * the watermark back (docs/claim-protocol.md#the-invariant). Parameter-bound, unlike the
   * other plain rows: the condition is the point.
   */
  async setWatermark(huntId: string, fire: number): Promise<void> {
    await this.write(
      `INSERT INTO ${this.watermarkTable} (hunt_id, watermark)
       SELECT {hunt:String}, {fire:Int64}
       WHERE {fire:Int64} > (SELECT if(count() = 0, toInt64(-9223372036854775807), argMax(watermark, updated)) FROM ${this.watermarkTable} WHERE hunt_id = {hunt:String})`,
      { hunt: huntId, fire },
    );
  }

  /**
   * A run's row; a finished run also records what it cost and its ClickHouse error code (docs/smoothing.md),
   * and the range its window left out by the catch-up bound (docs/hunts.md#catch-up).
   */
  async runRow(huntId: string, fire: number, status: RunStatus, rowsWritten: number, cost?: RunRowCost, skipped?: RunWindow): Promise<void> {
    const row = { hunt_id: huntId, fire, status, rows_written: rowsWritten };
    if (!cost) {
      await this.insertRows(TABLES.run, ['hunt_id', 'fire', 'status', 'rows_written'], [row]);
      return;
    }
    await this.insertRows(
      TABLES.run,
      ['hunt_id', 'fire', 'status', 'rows_written', 'duration_ms', 'cpu_us', 'memory_bytes', 'error_code', 'skipped_from', 'skipped_to'],
      [
        {
          ...row,
          duration_ms: cost.durationMs,
          cpu_us: cost.cpuUs,
          memory_bytes: cost.memoryBytes,
          error_code: cost.errorCode,
          skipped_from: skipped?.startSeconds ?? 0,
          skipped_to: skipped?.endSeconds ?? 0,
        },
      ],
    );
  }

  /** Run-now (docs/tables.md#run-now): a `requested` row at fire = the ClickHouse clock now; returns that fire. */
  async requestRun(huntId: string): Promise<number> {
    const [row] = await this.read<{ now_s: Num }>(`SELECT ${this.now} AS now_s`, {});
    const fire = Number(row?.now_s);
    await this.runRow(huntId, fire, RUN_STATUS.requested, 0);
    return fire;
  }

  /** The fires due now by the ClickHouse clock (what the shim's backlog counts), oldest first. */
  async dueNow(): Promise<DueFire[]> {
    const rows = await this.read<DueRow>(dueRowsSql(this.database), {});
    return rows.map((r) => ({ huntId: r.hunt_id, fire: Number(r.fire), requested: Number(r.requested) === 1, serverNow: Number(r.server_now) }));
  }

  /**
   * hunt_state.overrun_count += 1; only the lease owner writes it, so there is no
   * race. The newest row's disabled_reason/disabled_at are carried over: only
   * `enable` may clear them (docs/tables.md). The inner aggregate has no GROUP BY,
   * so it yields one row (count 0, not disabled) even for a hunt with no state yet.
   */
  async addOverrun(huntId: string): Promise<void> {
    const state = qualifiedTable(this.database, TABLES.state);
    await this.write(
      `INSERT INTO ${state} (hunt_id, overrun_count, too_aggressive, disabled_reason, disabled_at)
       SELECT {hunt:String}, n + 1, aggressive, reason, at FROM (
         SELECT argMax(overrun_count, updated) AS n, argMax(too_aggressive, updated) AS aggressive,
                argMax(disabled_reason, updated) AS reason, argMax(disabled_at, updated) AS at
         FROM ${state} WHERE hunt_id = {hunt:String})`,
      { hunt: huntId },
    );
  }
}
