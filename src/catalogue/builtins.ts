import type { Builtin } from './schema.js';
import type { FragmentSentinel } from './sentinels.js';

/**
 * What the catalogue's built-in words stand for, handed in by whoever composes
 * the program (the shim passes src/shim/catalogue-builtins.ts). The catalogue
 * knows the words (`builtin: hunt_backlog`, `__PRESSURE_MATCH__`, …) but not
 * their SQL, so it imports neither the runner's tables nor the pressure rule.
 * See docs/catalogue.md#built-ins-and-sentinels.
 */
export interface CatalogueBuiltins {
  /** The SQL of each `builtin:` query, for the query's resolved database. */
  readonly queries: Readonly<Record<Builtin, (databaseName: string) => string>>;
  /** The SQL fragment each sentinel other than `__DB__` is replaced by. */
  readonly sentinels: Readonly<Record<FragmentSentinel, () => string>>;
}
