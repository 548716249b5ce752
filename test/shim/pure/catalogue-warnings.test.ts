import { capturingLogger } from '../../helpers/logger.js';
import { describe, expect, it } from 'vitest';
import { compileCatalogue } from '../../../src/catalogue/compile.js';
import { parseCatalogueText } from '../../../src/catalogue/parse.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../../src/shim/catalogue-builtins.js';
import { makeApp } from '../../helpers/shim.js';

/** Issue 9 item 11: a deadline KEDA cannot wait for is logged at load and at a reload that changes it. */
const DBS = { dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS };
const catalogue = (yaml: string) => [...compileCatalogue([parseCatalogueText(yaml, 'override.yaml')], DBS).values()];
const NO_CLICKHOUSE = { backend: 'server' as const, target: 'none', client: undefined as never, afterQueryError: async () => undefined };

describe('catalogue warnings reach the log', () => {
  it('at startup and on a reload that changes the query', async () => {
    const { logger, lines } = capturingLogger();
    const t = await makeApp({ queries: catalogue('queries:\n  slow: {sql: SELECT 1, deadline_ms: 3500, timeout_seconds: 5}\n'), clickhouse: NO_CLICKHOUSE, logger });
    try {
      const warned = () => lines.filter((l) => l.level === 40 && l.key === 'deadline_ms');
      expect(warned()).toEqual([expect.objectContaining({ file: 'override.yaml', query: 'slow', value: 3500 })]);
      expect(String(warned()[0]?.msg)).toContain('override.yaml: query "slow" key "deadline_ms": 3500');
      t.catalogue.apply(catalogue('queries:\n  slow: {sql: SELECT 2, deadline_ms: 4000, timeout_seconds: 5}\n'));
      expect(warned().map((l) => l.value)).toEqual([3500, 4000]);
    } finally {
      await t.app.close();
    }
  });
});
