import type { ClickHouseClient, ClickHouseSettings } from '@clickhouse/client';
import type { Clock } from '../clock.js';
import { qualifiedTable } from '../clickhouse/identifiers.js';
import { dueTickSql, type DueTickRow } from './due-sql.js';
import type { CoordinationSettings } from './schema.js';
import { RUN_STATUS, TABLES } from './tables.js';

/**
 * The runner's reads and writes of the coordination tables (SPEC §7.2, §7.6),
 * kept thin: one method, one statement, every value a bound parameter. Reads
 * carry the topology's read settings and writes its write settings (quorum on
 * replicated tables), so a claim's read-back sees every competing claim.
 *
 * Time: coordination decisions use the ClickHouse clock (`now()`). The `clock`
 * time source binds `{now:Int64}` from an injected Clock instead, so tests can
 * drive the real SQL through simulated hours in milliseconds.
 */
export type CoordinationTime = { readonly kind: 'server' } | { readonly kind: 'clock'; readonly clock: Clock };

export interface LeaseRow {
  readonly owner: string;
  readonly fire: number;
  readonly leaseUntil: number;
  /** DateTime64(3) text as the server renders it; equal text = a tie. */
  readonly claimed: string;
}

export interface TickSnapshot {
  readonly serverNow: number;
  /** The shim's backlog (dueCountSql) at the same clock reading. */
  readonly backlog: number;
  readonly due: ReadonlyArray<{ readonly huntId: string; readonly fire: number; readonly requested: boolean }>;
}

export type RunStatus = (typeof RUN_STATUS)[keyof typeof RUN_STATUS];

const SERVER_NOW = 'toInt64(toUnixTimestamp(now()))';

export class Coordinator {
  private readonly lease: string;
  private readonly watermarkTable: string;
  private readonly run: string;
  private readonly heartbeatTable: string;
  private readonly state: string;

  constructor(
    private readonly client: ClickHouseClient,
    readonly database: string,
    readonly settings: CoordinationSettings,
    private readonly time: CoordinationTime = { kind: 'server' },
    private readonly signal?: AbortSignal,
  ) {
    this.lease = qualifiedTable(database, TABLES.lease);
    this.watermarkTable = qualifiedTable(database, TABLES.watermark);
    this.run = qualifiedTable(database, TABLES.run);
    this.heartbeatTable = qualifiedTable(database, TABLES.heartbeat);
    this.state = qualifiedTable(database, TABLES.state);
  }

  private get now(): string {
    return this.time.kind === 'server' ? SERVER_NOW : '{now:Int64}';
  }

  private params(values: Record<string, unknown>): Record<string, unknown> {
    if (this.time.kind === 'server') return values;
    return { ...values, now: Math.floor(this.time.clock.nowMs() / 1000) };
  }

  private async read<T>(query: string, values: Record<string, unknown>, settings: ClickHouseSettings = {}): Promise<T[]> {
    const rs = await this.client.query({
      query,
      query_params: this.params(values),
      format: 'JSONEachRow',
      clickhouse_settings: { ...this.settings.read, ...settings },
      ...(this.signal ? { abort_signal: this.signal } : {}),
    });
    return rs.json<T>();
  }

  private async write(query: string, values: Record<string, unknown>): Promise<void> {
    await this.client.command({
      query,
      query_params: this.params(values),
      clickhouse_settings: this.settings.write,
      ...(this.signal ? { abort_signal: this.signal } : {}),
    });
  }

  /** SPEC §7.6 step 1: the one due query of a tick. */
  async tick(): Promise<TickSnapshot> {
    const sql = dueTickSql(this.database, { now: this.time.kind === 'server' ? 'server' : 'param' });
    const [row] = await this.read<DueTickRow>(sql, {});
    if (!row) throw new Error('the due query returned no row');
    return {
      serverNow: Number(row.server_now),
      backlog: Number(row.backlog),
      due: row.due.map(([huntId, fire, requested]) => ({ huntId, fire: Number(fire), requested: Number(requested) === 1 })),
    };
  }

  async heartbeat(runnerId: string, pollSeconds: number): Promise<void> {
    await this.write(
      `INSERT INTO ${this.heartbeatTable} (runner_id, seen, poll_seconds) SELECT {runner:String}, ${this.now}, {poll:Float64}`,
      { runner: runnerId, poll: pollSeconds },
    );
  }

  /** The newest lease rows of a hunt (the claim's order), with the clock they were read at. */
  async newestLeases(huntId: string, limit: 1 | 2): Promise<{ rows: LeaseRow[]; nowSeconds: number | undefined }> {
    const rows = await this.read<{ owner: string; fire: string | number; lease_until: string | number; claimed: string; now_s: string | number }>(
      `SELECT owner, fire, lease_until, toString(claimed) AS claimed, ${this.now} AS now_s FROM ${this.lease}
       WHERE hunt_id = {hunt:String} ORDER BY claimed DESC, owner ASC LIMIT {limit:UInt8}`,
      { hunt: huntId, limit },
    );
    return {
      rows: rows.map((r) => ({ owner: r.owner, fire: Number(r.fire), leaseUntil: Number(r.lease_until), claimed: r.claimed })),
      nowSeconds: rows[0] === undefined ? undefined : Number(rows[0].now_s),
    };
  }

  /**
   * SPEC §7.6 step 3, the conditional insert: a lease row for (owner, fire),
   * written only if the newest lease row is not live. A live row of this same
   * owner blocks too: it can only be a late claim of ours (or a crashed
   * predecessor with our id), which may hide a winner whose row a merge dropped.
   */
  async conditionalClaim(huntId: string, owner: string, fire: number, leaseSeconds: number): Promise<void> {
    await this.write(
      `INSERT INTO ${this.lease} (hunt_id, owner, fire, lease_until, claimed)
       SELECT {hunt:String}, {owner:String}, {fire:Int64}, ${this.now} + {lease:Int64}, now64(3)
       FROM (
         SELECT count() AS live FROM (
           SELECT lease_until FROM ${this.lease} WHERE hunt_id = {hunt:String}
           ORDER BY claimed DESC, owner ASC LIMIT 1
         ) WHERE lease_until > ${this.now}
       ) WHERE live = 0`,
      { hunt: huntId, owner, fire, lease: leaseSeconds },
    );
  }

  /** A fresh lease row for a run in progress (renewal), or lease_until 0 (release). */
  async putLease(huntId: string, owner: string, fire: number, leaseSeconds: number | 'release'): Promise<void> {
    const until = leaseSeconds === 'release' ? '0' : `${this.now} + {lease:Int64}`;
    await this.write(
      `INSERT INTO ${this.lease} (hunt_id, owner, fire, lease_until, claimed)
       SELECT {hunt:String}, {owner:String}, {fire:Int64}, ${until}, now64(3)`,
      { hunt: huntId, owner, fire, ...(leaseSeconds === 'release' ? {} : { lease: leaseSeconds }) },
    );
  }

  /** The newest watermark (last completed fire), or null when the hunt never ran. */
  async watermark(huntId: string): Promise<number | null> {
    const rows = await this.read<{ watermark: string | number }>(
      `SELECT argMax(watermark, updated) AS watermark FROM ${this.watermarkTable} WHERE hunt_id = {hunt:String} GROUP BY hunt_id`,
      { hunt: huntId },
    );
    return rows[0] === undefined ? null : Number(rows[0].watermark);
  }

  async setWatermark(huntId: string, fire: number): Promise<void> {
    await this.write(`INSERT INTO ${this.watermarkTable} (hunt_id, watermark) SELECT {hunt:String}, {fire:Int64}`, { hunt: huntId, fire });
  }

  async runRow(huntId: string, fire: number, status: RunStatus, rowsWritten: number): Promise<void> {
    await this.write(
      `INSERT INTO ${this.run} (hunt_id, fire, status, rows_written) SELECT {hunt:String}, {fire:Int64}, {status:String}, {rows:Int64}`,
      { hunt: huntId, fire, status, rows: rowsWritten },
    );
  }

  /** Run-now (SPEC §7.6): a `requested` row at fire = now; returns that fire. */
  async requestRun(huntId: string): Promise<number> {
    const [row] = await this.read<{ now_s: string | number }>(`SELECT ${this.now} AS now_s`, {});
    const fire = Number(row?.now_s);
    await this.runRow(huntId, fire, RUN_STATUS.requested, 0);
    return fire;
  }

  /** hunt_state.overrun_count += 1; only the lease owner writes it, so there is no race. */
  async addOverrun(huntId: string): Promise<void> {
    await this.write(
      `INSERT INTO ${this.state} (hunt_id, overrun_count, too_aggressive)
       SELECT {hunt:String}, (SELECT ifNull(max(n), 0) + 1 FROM (SELECT argMax(overrun_count, updated) AS n FROM ${this.state} WHERE hunt_id = {hunt:String})), 0`,
      { hunt: huntId },
    );
  }
}
