import type { CatalogueBuiltins } from '../catalogue/builtins.js';
import { backlogCountSql } from '../coordination/backlog-refresh.js';
import { pressureMatchSql, pressureNameSql } from '../pressure/rule.js';

/**
 * The shim's registry of catalogue built-ins: `hunt_backlog` is THE due-hunt
 * count the runner's gate uses too (docs/tables.md#the-due-rule), read from the
 * server-refreshed count when `DFE_BACKLOG_REFRESH_SECONDS` turns it on
 * (docs/tables.md#the-server-refreshed-count), and the pressure sentinels are the
 * one pressure rule (docs/pressure.md). Composed here so the catalogue itself
 * imports neither coordination nor pressure.
 */
export function shimCatalogueBuiltins(backlogRefreshSeconds: number): CatalogueBuiltins {
  return Object.freeze({
    queries: Object.freeze({ hunt_backlog: (databaseName: string) => backlogCountSql(databaseName, backlogRefreshSeconds) }),
    sentinels: Object.freeze({ __PRESSURE_MATCH__: pressureMatchSql, __PRESSURE_NAME__: pressureNameSql }),
  });
}

/** The built-ins with the refresh off (the default): the due count on every fresh poll. */
export const SHIM_CATALOGUE_BUILTINS: CatalogueBuiltins = shimCatalogueBuiltins(0);
