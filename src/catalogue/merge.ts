import type { Layer } from './parse.js';
import type { RawQuery } from './schema.js';
import { dropWholeTies, replacesSql, type SqlTies } from './sql-ties.js';

/**
 * The merge rules of docs/catalogue.md#merge-rules, pure: the override is laid over the built-in
 * catalogue. Maps merge key by key (recursively, e.g. `binds`); lists and
 * scalars from the override replace; new names add queries; `sql` in an
 * override replaces a `builtin` of the same query and vice versa, and takes
 * the earlier files' parts tied to the old SQL along (sql-ties.ts); a query
 * whose merged `enabled` is false is removed.
 */
export interface MergedQuery {
  readonly name: string;
  /** The merged keys, without `enabled`. */
  readonly raw: RawQuery;
  /** For each key, the file whose value won: errors about that key name it. */
  readonly origin: Readonly<Record<string, string>>;
  /** The last file that mentions the query: errors about a missing key name it. */
  readonly file: string;
  /** When a later file replaced the SQL: what went with the old one, and what stays only if the new SQL uses it. */
  readonly ties?: SqlTies | undefined;
}

type PlainMap = Record<string, unknown>;

function isPlainMap(value: unknown): value is PlainMap {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Deep merge of two YAML values. Builds with fromEntries so a `__proto__` key stays a plain key. */
export function mergeValue(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  if (!isPlainMap(base) || !isPlainMap(over)) return over;
  const keys = [...new Set([...Object.keys(base), ...Object.keys(over)])];
  return Object.fromEntries(keys.map((k) => [k, Object.hasOwn(over, k) ? mergeValue(base[k], over[k]) : base[k]]));
}

/** One query of the override laid over the same query of the base. */
export function mergeQuery(base: RawQuery, over: RawQuery): RawQuery {
  const merged = mergeValue(base, over) as PlainMap;
  // sql and builtin are two ways to say the same thing: the override's choice wins.
  if (over.sql !== undefined && over.builtin === undefined) delete merged['builtin'];
  if (over.builtin !== undefined && over.sql === undefined) delete merged['sql'];
  return merged as RawQuery;
}

/** Merges the layers in order (built-in first) and drops disabled queries. */
export function mergeLayers(layers: readonly Layer[]): Map<string, MergedQuery> {
  const byName = new Map<string, { raw: RawQuery; origin: Record<string, string>; file: string; ties: SqlTies | undefined }>();
  for (const layer of layers) {
    for (const [name, over] of layer.queries) {
      const previous = byName.get(name);
      let raw = over;
      let ties = previous?.ties;
      if (previous !== undefined) {
        const merged = mergeQuery(previous.raw, over) as PlainMap;
        if (replacesSql(over)) ties = dropWholeTies(merged, previous.raw, over, previous.origin, layer.file);
        else if (ties !== undefined) ties = narrowTies(ties, over);
        raw = merged as RawQuery;
      }
      const origin: Record<string, string> = Object.fromEntries(
        Object.keys(raw).map((k) => [k, Object.hasOwn(over, k) ? layer.file : (previous?.origin[k] ?? layer.file)]),
      );
      byName.set(name, { raw, origin, file: layer.file, ties });
    }
  }
  const out = new Map<string, MergedQuery>();
  for (const [name, { raw, origin, file, ties }] of byName) {
    if (raw.enabled === false) continue;
    const { enabled: _enabled, ...rest } = raw;
    out.set(name, { name, raw: rest, origin, file, ...(ties === undefined ? {} : { ties }) });
  }
  return out;
}

/** A later file that keeps the SQL but sets params or binds itself: those names are no longer inherited. */
function narrowTies(ties: SqlTies, over: RawQuery): SqlTies {
  const keep = (names: Readonly<Record<string, string>>, set: (name: string) => boolean) =>
    Object.fromEntries(Object.entries(names).filter(([name]) => !set(name)));
  return {
    ...ties,
    inheritedParams: over.params === undefined ? ties.inheritedParams : {},
    inheritedBinds: keep(ties.inheritedBinds, (name) => over.binds === null || (over.binds !== undefined && Object.hasOwn(over.binds, name))),
  };
}
