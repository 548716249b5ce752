/**
 * The grants a user needs (docs/clickhouse-users.md) against what `SHOW GRANTS` says it has.
 * Pure: grant lines in, the missing privileges out. Covers the forms ClickHouse prints:
 * `GRANT <privileges> ON <db>.<table> TO <who>` (with `*` for any database or table) and
 * partial revokes (`REVOKE … FROM …`); a column-level grant (`SELECT(a, b)`) does not count
 * as the table's. Role grants (`GRANT role TO user`) carry no privileges here: read the
 * grants with `SHOW GRANTS FINAL`, which folds the roles in.
 */
export interface Need {
  /** As ClickHouse names it: `SELECT`, `INSERT`, `CREATE TABLE`. */
  readonly privilege: string;
  readonly database: string;
  /** A table name, or `*` for every table of the database. */
  readonly table: string;
}

interface Grant {
  readonly revoke: boolean;
  readonly privileges: readonly string[];
  readonly database: string;
  readonly table: string;
}

/** The broader privileges that include one (ClickHouse's hierarchy, the part we use). */
const IMPLIED_BY: Readonly<Record<string, readonly string[]>> = {
  SELECT: [],
  INSERT: [],
  'CREATE TABLE': ['CREATE'],
  'CREATE VIEW': ['CREATE'],
  'CREATE DATABASE': ['CREATE'],
  'DROP VIEW': ['DROP'],
  'ALTER DELETE': ['ALTER', 'ALTER TABLE'],
};

function unquote(name: string): string {
  return name.replace(/^[`"](.*)[`"]$/s, '$1');
}

/** Splits on commas outside parentheses (a column list stays with its privilege). */
export function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === '(') depth += 1;
    else if (text[i] === ')') depth -= 1;
    else if (text[i] === ',' && depth === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  return [...parts, text.slice(start).trim()].filter((p) => p !== '');
}

const LINE = /^(GRANT|REVOKE)\s+(.+?)\s+ON\s+(\S+?)\s+(?:TO|FROM)\s+/i;

/** One grant line, or undefined for a role grant or a line of another form. */
export function parseGrant(line: string): Grant | undefined {
  const match = LINE.exec(line.trim());
  if (!match?.[1] || !match[2] || !match[3]) return undefined;
  const target = match[3];
  const dot = target.indexOf('.');
  const database = unquote(dot === -1 ? target : target.slice(0, dot));
  const table = dot === -1 ? '*' : unquote(target.slice(dot + 1));
  const privileges = splitTop(match[2]).map((p) => p.toUpperCase().replace(/\s+/g, ' '));
  return { revoke: match[1].toUpperCase() === 'REVOKE', privileges, database, table };
}

function covers(grant: Grant, need: Need): boolean {
  const targetOk = (grant.database === '*' || grant.database === need.database) && (grant.table === '*' || grant.table === need.table);
  if (!targetOk) return false;
  const names = [need.privilege, ...(IMPLIED_BY[need.privilege] ?? []), 'ALL', 'ALL PRIVILEGES'];
  return grant.privileges.some((p) => names.includes(p));
}

/** The needs the grant lines do not cover. */
export function missingGrants(lines: readonly string[], needs: readonly Need[]): Need[] {
  const grants = lines.map(parseGrant).filter((g): g is Grant => g !== undefined);
  return needs.filter((need) => {
    const granted = grants.some((g) => !g.revoke && covers(g, need));
    const revoked = grants.some((g) => g.revoke && covers(g, need));
    return !granted || revoked;
  });
}

/** `SELECT, INSERT ON dfe.hunt_run`: the needs grouped by target, for a message or a GRANT. */
export function describeNeeds(needs: readonly Need[]): string[] {
  const byTarget = new Map<string, string[]>();
  for (const n of needs) {
    const key = `${n.database}.${n.table}`;
    byTarget.set(key, [...(byTarget.get(key) ?? []), n.privilege]);
  }
  return [...byTarget].map(([target, privileges]) => `${privileges.join(', ')} ON ${target}`);
}
