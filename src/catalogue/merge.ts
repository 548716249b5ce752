import type { Layer } from './parse.js';
import type { RawQuery } from './schema.js';

/**
 * The merge rules of docs/catalogue.md#merge-rules, pure: the override is laid over the built-in
 * catalogue. Maps merge key by key (recursively, e.g. `binds`); lists and
 * scalars from the override replace; new names add queries; `sql` in an
 * override replaces a `builtin` of the same query and vice versa; a query
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
  const byName = new Map<string, { raw: RawQuery; origin: Record<string, string>; file: string }>();
  for (const layer of layers) {
    for (const [name, over] of layer.queries) {
      const previous = byName.get(name);
      const raw = previous === undefined ? over : mergeQuery(previous.raw, over);
      const origin: Record<string, string> = Object.fromEntries(
        Object.keys(raw).map((k) => [k, Object.hasOwn(over, k) ? layer.file : (previous?.origin[k] ?? layer.file)]),
      );
      byName.set(name, { raw, origin, file: layer.file });
    }
  }
  const out = new Map<string, MergedQuery>();
  for (const [name, { raw, origin, file }] of byName) {
    if (raw.enabled === false) continue;
    const { enabled: _enabled, ...rest } = raw;
    out.set(name, { name, raw: rest, origin, file });
  }
  return out;
}
