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
 */
const SHIM_READS = [TABLES.schedule, TABLES.watermark, TABLES.lease, TABLES.run, TABLES.state];

export interface NeedsInput {
  readonly role: DoctorRole;
  readonly database: string;
  readonly otelDatabase: string;
  readonly hunts: readonly HuntSpec[];
  /** The current database, for a hunt statement that names none. */
  readonly currentDatabase: string;
}

export function grantNeeds(input: NeedsInput): Need[] {
  const { database } = input;
  if (input.role === 'shim') {
    return [
      ...SHIM_READS.map((table) => ({ privilege: 'SELECT', database, table })),
      { privilege: 'SELECT', database: input.otelDatabase, table: OTEL_GAUGE_TABLE },
    ];
  }
  const coordination = TABLE_DEFS.flatMap((def) => ['SELECT', 'INSERT'].map((privilege) => ({ privilege, database, table: def.name })));
  const outputs = input.hunts.flatMap((hunt) =>
    outputTables(hunt.statements).map((t) => ({ privilege: 'INSERT', database: t.database ?? input.currentDatabase, table: t.table })),
  );
  const unique = new Map([...coordination, ...outputs].map((n) => [`${n.privilege} ${n.database}.${n.table}`, n]));
  return [{ privilege: 'CREATE TABLE', database, table: '*' }, ...unique.values()];
}

/** Each coordination table and the columns `schema --apply` gives it (coordination/tables.ts). */
export function expectedColumns(): ReadonlyMap<string, readonly string[]> {
  return new Map(
    TABLE_DEFS.map((def) => [def.name, [...splitTop(def.columns).map((c) => c.split(/\s+/)[0] ?? c), ...(def.added ?? []).map((a) => a.name)]]),
  );
}
