import type { ClickHouseClient, ClickHouseSettings } from '@clickhouse/client';
import type { Logger } from '../log.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import { outputTables } from '../schedule/output-tables.js';

/**
 * Whether a hunt's output tables deduplicate a repeated insert (docs/hunts.md#output-tables): a
 * window run twice sends the same `insert_deduplication_token`, and only a table that
 * deduplicates keeps one copy. Replicated (and Shared) MergeTree tables do by default
 * (`replicated_deduplication_window`, 100 in ClickHouse's defaults); a plain MergeTree table
 * does only with `non_replicated_deduplication_window` > 0 (0 by default); no other engine does.
 * The verdict is pure; `checkOutputDedup` reads system.tables with bound parameters.
 */
export type DedupVerdict =
  | { readonly kind: 'deduplicated'; readonly how: string }
  | { readonly kind: 'not-deduplicated'; readonly reason: string }
  /** Distributed: the local tables decide. */
  | { readonly kind: 'unknown'; readonly reason: string }
  | { readonly kind: 'missing' };

/** The server's defaults of the two window settings (system.merge_tree_settings). */
export interface DedupDefaults {
  readonly replicatedWindow: number;
  readonly nonReplicatedWindow: number;
}

/** A table's own value of a MergeTree setting, from `engine_full`'s SETTINGS clause. */
export function tableSetting(engineFull: string, name: string): number | undefined {
  const settings = /\sSETTINGS\s(.*)$/s.exec(engineFull)?.[1];
  const match = settings === undefined ? null : new RegExp(`(?:^|[\\s,])${name}\\s*=\\s*'?(\\d+)`).exec(settings);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

export function dedupVerdict(engine: string, engineFull: string, defaults: DedupDefaults): DedupVerdict {
  if (/^(?:Replicated|Shared)\w*MergeTree$/.test(engine)) {
    const window = tableSetting(engineFull, 'replicated_deduplication_window') ?? defaults.replicatedWindow;
    return window > 0
      ? { kind: 'deduplicated', how: `${engine}: replicated_deduplication_window = ${window}` }
      : { kind: 'not-deduplicated', reason: `${engine} with replicated_deduplication_window = 0` };
  }
  if (/MergeTree$/.test(engine)) {
    const window = tableSetting(engineFull, 'non_replicated_deduplication_window') ?? defaults.nonReplicatedWindow;
    return window > 0
      ? { kind: 'deduplicated', how: `${engine}: non_replicated_deduplication_window = ${window}` }
      : { kind: 'not-deduplicated', reason: `${engine} without non_replicated_deduplication_window (0: inserts are not deduplicated)` };
  }
  if (engine === 'Distributed') return { kind: 'unknown', reason: 'Distributed: deduplication is decided by the local tables it writes to' };
  return { kind: 'not-deduplicated', reason: `${engine} never deduplicates inserts` };
}

export interface OutputDedupFinding {
  readonly huntId: string;
  /** `db.table` as resolved (the current database where the statement names none). */
  readonly table: string;
  readonly engine: string | undefined;
  readonly verdict: DedupVerdict;
}

/** The fix an operator applies, for a finding that lacks deduplication. */
export function dedupFix(finding: OutputDedupFinding): string {
  const { verdict, table, engine } = finding;
  if (verdict.kind === 'missing') return `create ${table} (a Replicated*MergeTree, or a MergeTree with SETTINGS non_replicated_deduplication_window = 1000)`;
  if (verdict.kind === 'unknown') return `check that the local tables behind ${table} deduplicate (Replicated*MergeTree)`;
  if (engine !== undefined && /MergeTree$/.test(engine)) {
    const setting = /^(?:Replicated|Shared)/.test(engine) ? 'replicated_deduplication_window = 100' : 'non_replicated_deduplication_window = 1000';
    return `ALTER TABLE ${table} MODIFY SETTING ${setting}`;
  }
  return `write to a Replicated*MergeTree table, or a MergeTree with SETTINGS non_replicated_deduplication_window = 1000, instead of ${engine ?? 'this engine'}`;
}

interface TableRow {
  readonly database: string;
  readonly name: string;
  readonly engine: string;
  readonly engine_full: string;
}

async function readDefaults(client: ClickHouseClient, settings: ClickHouseSettings): Promise<{ current: string; defaults: DedupDefaults }> {
  const rs = await client.query({
    query: `SELECT currentDatabase() AS current,
              toUInt64OrZero(anyIf(value, name = 'replicated_deduplication_window')) AS replicated,
              toUInt64OrZero(anyIf(value, name = 'non_replicated_deduplication_window')) AS non_replicated
            FROM system.merge_tree_settings
            WHERE name IN ('replicated_deduplication_window', 'non_replicated_deduplication_window')`,
    format: 'JSONEachRow',
    clickhouse_settings: settings,
  });
  const [row] = await rs.json<{ current: string; replicated: number | string; non_replicated: number | string }>();
  return {
    current: row?.current ?? 'default',
    defaults: { replicatedWindow: Number(row?.replicated ?? 0), nonReplicatedWindow: Number(row?.non_replicated ?? 0) },
  };
}

/** One finding per (hunt, output table), in hunt order. */
export async function checkOutputDedup(
  client: ClickHouseClient,
  hunts: readonly HuntSpec[],
  settings: ClickHouseSettings = {},
): Promise<OutputDedupFinding[]> {
  const { current, defaults } = await readDefaults(client, settings);
  const wanted = hunts.flatMap((hunt) => outputTables(hunt.statements).map((t) => ({ huntId: hunt.huntId, database: t.database ?? current, table: t.table })));
  if (wanted.length === 0) return [];
  const rs = await client.query({
    query: 'SELECT database, name, engine, engine_full FROM system.tables WHERE has({dbs:Array(String)}, database) AND has({names:Array(String)}, name)',
    query_params: { dbs: [...new Set(wanted.map((w) => w.database))], names: [...new Set(wanted.map((w) => w.table))] },
    format: 'JSONEachRow',
    clickhouse_settings: settings,
  });
  const found = new Map((await rs.json<TableRow>()).map((r) => [`${r.database}.${r.name}`, r]));
  return wanted.map(({ huntId, database, table }) => {
    const name = `${database}.${table}`;
    const row = found.get(name);
    if (!row) return { huntId, table: name, engine: undefined, verdict: { kind: 'missing' } };
    return { huntId, table: name, engine: row.engine, verdict: dedupVerdict(row.engine, row.engine_full, defaults) };
  });
}

/** The findings that need the operator: every one but `deduplicated`. */
export function withoutDedup(findings: readonly OutputDedupFinding[]): OutputDedupFinding[] {
  return findings.filter((f) => f.verdict.kind !== 'deduplicated');
}

/** One line per finding: the hunt, the table, what it lacks. */
export function describeFinding(finding: OutputDedupFinding): string {
  const { verdict } = finding;
  const what =
    verdict.kind === 'missing' ? 'does not exist' : verdict.kind === 'deduplicated' ? `deduplicates (${verdict.how})` : verdict.reason;
  return `hunt ${finding.huntId} writes ${finding.table}: ${what}`;
}

/** `materialise`'s warnings: one per hunt and table that does not deduplicate. */
export function warnOutputDedup(log: Pick<Logger, 'warn'>, findings: readonly OutputDedupFinding[]): void {
  for (const finding of withoutDedup(findings)) {
    log.warn(
      { hunt_id: finding.huntId, table: finding.table, engine: finding.engine ?? null, fix: dedupFix(finding) },
      `${describeFinding(finding)}; a window run twice would write its rows twice (docs/hunts.md#output-tables); fix: ${dedupFix(finding)}`,
    );
  }
}
