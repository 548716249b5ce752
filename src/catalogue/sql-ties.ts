import type { RawQuery } from './schema.js';

/**
 * Keys tied to a query's SQL (docs/catalogue.md#a-new-sql-takes-its-ties-along), pure. When a
 * later file replaces the SQL (`sql` or `builtin`), what an earlier file set for the old SQL
 * goes with it instead of stopping the shim — an override written for the original's format
 * knows nothing of them:
 * - `batch`: a second copy of the old SQL; the query then runs one by one;
 * - `result_field`: a column of the old SQL's row;
 * - `params` and `binds` names with no `{name:Type}` placeholder in the new SQL (known only
 *   once the SQL is, so compile drops those; merge lists the candidates).
 * What the replacing file sets next to its SQL always applies.
 */
export const WHOLE_TIED_KEYS = ['batch', 'result_field'] as const;

/** One part an earlier file set that went with the SQL it belonged to. */
export interface DroppedPart {
  /** `batch`, `result_field`, `params.<name>` or `binds.<name>`. */
  readonly part: string;
  /** The file that had set it. */
  readonly file: string;
}

/** What the file that replaced a query's SQL left standing from earlier files. */
export interface SqlTies {
  /** The file that replaced the SQL. */
  readonly file: string;
  /** Whole keys dropped at merge. */
  readonly dropped: readonly DroppedPart[];
  /** Names kept only while the new SQL has a placeholder for them, with the file that set each. */
  readonly inheritedParams: Readonly<Record<string, string>>;
  readonly inheritedBinds: Readonly<Record<string, string>>;
}

/** Does this layer of a query set its SQL? */
export function replacesSql(over: RawQuery): boolean {
  return over.sql !== undefined || over.builtin !== undefined;
}

/**
 * `merged` (base laid under over) without the whole keys tied to the base's SQL; `origin`
 * says which file set each key of the base. Mutates and returns `merged`, and the ties.
 */
export function dropWholeTies(
  merged: Record<string, unknown>,
  base: RawQuery,
  over: RawQuery,
  origin: Readonly<Record<string, string>>,
  overFile: string,
): SqlTies {
  const dropped: DroppedPart[] = [];
  for (const key of WHOLE_TIED_KEYS) {
    if (Object.hasOwn(over, key)) {
      // The replacing file's own value stands alone: nothing of the old block (its sql) merges in.
      merged[key] = over[key];
    } else if (base[key] !== undefined) {
      delete merged[key];
      if (base[key] !== null) dropped.push({ part: key, file: origin[key] ?? overFile });
    }
  }
  const fromBase = (names: readonly string[], key: 'params' | 'binds') =>
    Object.fromEntries(names.map((name) => [name, origin[key] ?? overFile]));
  const inheritedParams = over.params === undefined ? fromBase(base.params ?? [], 'params') : {};
  const overBinds = over.binds;
  const inheritedBinds =
    overBinds === null ? {} : fromBase(Object.keys(base.binds ?? {}).filter((name) => overBinds === undefined || !Object.hasOwn(overBinds, name)), 'binds');
  return { file: overFile, dropped, inheritedParams, inheritedBinds };
}

/** The start-log line for the parts dropped from one query. */
export function describeDropped(file: string, query: string, dropped: readonly DroppedPart[]): string {
  const parts = dropped.map((d) => `${d.part} (set by ${d.file})`).join(', ');
  const batch = dropped.some((d) => d.part === 'batch') ? '; without a batch form it answers each key with its own query' : '';
  return (
    `${file}: query ${JSON.stringify(query)} replaces the SQL, so the built-in parts that belonged to the old SQL were dropped: ` +
    `${parts}${batch}. Set them next to the new sql to keep them`
  );
}
