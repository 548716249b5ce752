import { OTEL_GAUGE_TABLE } from '../pressure/otel-table.js';
import { TABLE_DEFS, TABLES } from '../coordination/tables.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import { outputTables } from '../schedule/output-tables.js';
import type { DoctorRole } from './context.js';
import { splitTop, type Need } from './grants.js';

/**
 * The grants each program's user needs: docs/clickhouse-users.md as data. The shim reads what
 * the due query reads (coordination/due-sql.ts) and the OTel gauge table; the runner creates,
 * reads and writes every coordination table and inserts into each hunt's output tables
 * (what its hunts read is theirs to know; the doctor does not parse SELECTs).
 *
 * With DFE_BACKLOG_REFRESH_SECONDS > 0 (docs/tables.md#the-server-refreshed-count) the shim
 * also reads hunt_backlog, and the runner creates and drops the refreshable view, which runs
 * as the runner's user: creating a view `TO` a table takes SELECT and INSERT on that table,
 * and each refresh inserts into it. With 0 nothing reads or writes hunt_backlog (the schema
 * step creates it under CREATE TABLE), so no grant is asked for it.
 */
const SHIM_READS = [TABLES.schedule, TABLES.watermark, TABLES.lease, TABLES.run, TABLES.state];

export interface NeedsInput {
  readonly role: DoctorRole;
  readonly database: string;
  readonly otelDatabase: string;
  readonly hunts: readonly HuntSpec[];
  /** The current database, for a hunt statement that names none. */
  readonly currentDatabase: string;
  /** DFE_BACKLOG_REFRESH_SECONDS (config.clickhouse.backlogRefreshSeconds); 0 = off. */
  readonly backlogRefreshSeconds: number;
}

export function grantNeeds(input: NeedsInput): Need[] {
  const { database } = input;
  const refreshed = input.backlogRefreshSeconds > 0;
  if (input.role === 'shim') {
    return [
      ...SHIM_READS.map((table) => ({ privilege: 'SELECT', database, table })),
      ...(refreshed ? [{ privilege: 'SELECT', database, table: TABLES.backlog }] : []),
      { privilege: 'SELECT', database: input.otelDatabase, table: OTEL_GAUGE_TABLE },
    ];
  }
  const readWrite = (table: string): Need[] => ['SELECT', 'INSERT'].map((privilege) => ({ privilege, database, table }));
  const coordination = [...TABLE_DEFS.map((def) => def.name), ...(refreshed ? [TABLES.backlog] : [])].flatMap(readWrite);
  const outputs = input.hunts.flatMap((hunt) =>
    outputTables(hunt.statements).map((t) => ({ privilege: 'INSERT', database: t.database ?? input.currentDatabase, table: t.table })),
  );
  const unique = new Map([...coordination, ...outputs].map((n) => [`${n.privilege} ${n.database}.${n.table}`, n]));
  const ddl = ['CREATE TABLE', ...(refreshed ? ['CREATE VIEW', 'DROP VIEW'] : [])].map((privilege) => ({ privilege, database, table: '*' }));
  return [...ddl, ...unique.values()];
}

/** Each coordination table and the columns `schema --apply` gives it (coordination/tables.ts). */
export function expectedColumns(): ReadonlyMap<string, readonly string[]> {
  return new Map(
    TABLE_DEFS.map((def) => [def.name, [...splitTop(def.columns).map((c) => c.split(/\s+/)[0] ?? c), ...(def.added ?? []).map((a) => a.name)]]),
  );
}
