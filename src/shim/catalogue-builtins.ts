import type { CatalogueBuiltins } from '../catalogue/builtins.js';
import { dueCountSql } from '../coordination/due-sql.js';
import { pressureMatchSql, pressureNameSql } from '../pressure/rule.js';

/**
 * The shim's registry of catalogue built-ins: `hunt_backlog` is THE due-hunt
 * SQL the runner's gate uses too (docs/tables.md#the-due-rule), and the pressure
 * sentinels are the one pressure rule (docs/pressure.md). Composed here so the
 * catalogue itself imports neither coordination nor pressure.
 */
export const SHIM_CATALOGUE_BUILTINS: CatalogueBuiltins = Object.freeze({
  queries: Object.freeze({ hunt_backlog: (databaseName: string) => dueCountSql(databaseName) }),
  sentinels: Object.freeze({ __PRESSURE_MATCH__: pressureMatchSql, __PRESSURE_NAME__: pressureNameSql }),
});
