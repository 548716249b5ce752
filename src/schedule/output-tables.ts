/**
 * The tables a hunt writes: the target of each statement that starts with `INSERT INTO`
 * (docs/hunts.md). Pure: statement text in, table names out. What those tables must provide
 * (deduplication of a repeated insert) is checked by coordination/output-dedup.ts.
 */
export interface OutputTable {
  /** The database the statement names, or undefined: the connection's current database. */
  readonly database: string | undefined;
  readonly table: string;
}

const IDENT = String.raw`(?:\x60(?:[^\x60\\]|\\.)+\x60|"(?:[^"\\]|\\.)+"|[A-Za-z_][A-Za-z0-9_]*)`;
const INSERT_INTO = new RegExp(String.raw`^INSERT\s+INTO\s+(?:TABLE\s+)?(${IDENT})(?:\s*\.\s*(${IDENT}))?`, 'i');
/** Leading whitespace and comments (`-- …` lines, `/* … *\/` blocks) before the statement's first word. */
const LEADING = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/;

function unquote(ident: string): string {
  const first = ident[0];
  if (first !== '`' && first !== '"') return ident;
  return ident.slice(1, -1).replace(/\\(.)/g, '$1');
}

/** The table one statement inserts into, or undefined (a SELECT, or `INSERT INTO FUNCTION …`). */
export function insertTarget(sql: string): OutputTable | undefined {
  const match = INSERT_INTO.exec(sql.replace(LEADING, ''));
  if (!match?.[1]) return undefined;
  const [, first, second] = match;
  if (second === undefined && /^function$/i.test(first)) return undefined;
  return second === undefined ? { database: undefined, table: unquote(first) } : { database: unquote(first), table: unquote(second) };
}

/** Every table the statements insert into, each once, in order of first use. */
export function outputTables(statements: readonly { readonly query: string }[]): OutputTable[] {
  const seen = new Map<string, OutputTable>();
  for (const { query } of statements) {
    const target = insertTarget(query);
    if (target) seen.set(`${target.database ?? ''}\u0000${target.table}`, target);
  }
  return [...seen.values()];
}
