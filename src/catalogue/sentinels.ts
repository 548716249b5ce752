import { quoteDatabase } from '../clickhouse/identifiers.js';
import type { CatalogueBuiltins } from './builtins.js';

/**
 * SQL sentinels (docs/catalogue.md#built-ins-and-sentinels): text the catalogue writes and code replaces before
 * use. `__DB__` is the query's database; the others are fragments the caller's
 * registry supplies (the pressure rule, owned by pressure/rule.ts), so every
 * catalogue matches the same rows.
 */
export const SENTINELS = Object.freeze(['__DB__', '__PRESSURE_MATCH__', '__PRESSURE_NAME__'] as const);
export type Sentinel = (typeof SENTINELS)[number];
/** The sentinels whose SQL comes from the registry (CatalogueBuiltins.sentinels). */
export type FragmentSentinel = Exclude<Sentinel, '__DB__'>;

/** Anything shaped like a sentinel: `__` UPPER_SNAKE `__`. */
const SENTINEL_SHAPE = /__[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*__/g;

/** Sentinel-shaped tokens that are not known sentinels, in order of appearance, once each. */
export function unknownSentinels(sql: string): string[] {
  const found = sql.match(SENTINEL_SHAPE) ?? [];
  return [...new Set(found.filter((token) => !(SENTINELS as readonly string[]).includes(token)))];
}

/** Replaces every sentinel; the database is validated and backtick-quoted here. */
export function replaceSentinels(sql: string, databaseName: string, fragments: CatalogueBuiltins['sentinels']): string {
  const values: Record<Sentinel, () => string> = {
    __DB__: () => quoteDatabase(databaseName),
    __PRESSURE_MATCH__: fragments.__PRESSURE_MATCH__,
    __PRESSURE_NAME__: fragments.__PRESSURE_NAME__,
  };
  let out = sql;
  for (const sentinel of SENTINELS) {
    if (out.includes(sentinel)) out = out.split(sentinel).join(values[sentinel]());
  }
  return out;
}

/** ClickHouse query-parameter placeholders `{name:Type}`: the names, once each. */
export function placeholderNames(sql: string): string[] {
  const names = [...sql.matchAll(/\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*[^{}]+\}/g)].map((m) => m[1] ?? '');
  return [...new Set(names)];
}
