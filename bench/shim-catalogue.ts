import { loadCatalogue } from '../src/catalogue/load.js';
import type { Catalogue } from '../src/catalogue/types.js';
import { systemClock } from '../src/clock.js';
import type { ClickHouseConfig } from '../src/config/load.js';
import { shimCatalogueBuiltins } from '../src/shim/catalogue-builtins.js';

/**
 * The catalogue as the shim compiles it (the built-in file, `overridePath` over it, the
 * config's databases): what a bench's direct side or bare proxy sends, the same SQL.
 */
export function shimCatalogue(overridePath: string, clickhouse: Pick<ClickHouseConfig, 'dataDatabase' | 'otelDatabase' | 'backlogRefreshSeconds'>): Promise<Catalogue> {
  return loadCatalogue({
    overridePath,
    dataDatabase: clickhouse.dataDatabase,
    otelDatabase: clickhouse.otelDatabase,
    builtins: shimCatalogueBuiltins(clickhouse.backlogRefreshSeconds),
    clock: systemClock,
  });
}
