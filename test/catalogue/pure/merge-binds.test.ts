import { describe, expect, it } from 'vitest';
import { compileCatalogue } from '../../../src/catalogue/compile.js';
import { parseCatalogueText } from '../../../src/catalogue/parse.js';
import { DfeError } from '../../../src/errors.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../../src/shim/catalogue-builtins.js';

/**
 * An override that replaces a built-in's `sql`: the built-in's binds the new SQL
 * has a placeholder for stay, the others go with the old SQL (named in a
 * warning, issue 28), and `binds: null` in the override clears them all.
 */
const BASE = '/etc/builtin/queries.yaml';
const OVER = '/etc/dfe/override.yaml';
const DBS = { dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS };
const BUILTIN = 'queries:\n  p:\n    sql: "SELECT {w:UInt32} AS value"\n    binds: {w: 60}\n';

const compile = (override: string) => compileCatalogue([parseCatalogueText(BUILTIN, BASE), parseCatalogueText(override, OVER)], DBS);

function errorOf(fn: () => unknown): DfeError {
  try {
    fn();
  } catch (err) {
    if (err instanceof DfeError) return err;
    throw err;
  }
  throw new Error('expected a CATALOGUE_INVALID');
}

describe('an override replacing sql under built-in binds', () => {
  it('drops a built-in bind the new SQL has no placeholder for, and says so once', () => {
    const q = compile('queries:\n  p:\n    sql: SELECT 2 AS value\n').get('p');
    expect({ binds: q?.binds, warnings: q?.warnings?.map((w) => [w.file, w.query, w.value]) }).toEqual({ binds: {}, warnings: [[OVER, 'p', ['binds.w']]] });
    expect(q?.warnings?.[0]?.message).toContain(`binds.w (set by ${BASE})`);
  });

  it('keeps a built-in bind the new SQL uses, with the value the built-in set', () => {
    const q = compile('queries:\n  p:\n    sql: "SELECT {w:UInt32} + 1 AS value"\n').get('p');
    expect({ binds: q?.binds, warnings: q?.warnings }).toEqual({ binds: { w: 60 }, warnings: undefined });
  });

  it('a param of the built-in the new SQL does not use goes too; one the override sets stays its own problem', () => {
    const base = 'queries:\n  p:\n    sql: "SELECT {k:String} AS value"\n    params: [k]\n';
    const layers = (over: string) => [parseCatalogueText(base, BASE), parseCatalogueText(over, OVER)];
    const q = compileCatalogue(layers('queries:\n  p:\n    sql: SELECT 1 AS value\n'), DBS).get('p');
    expect({ params: q?.params, dropped: q?.warnings?.[0]?.value }).toEqual({ params: [], dropped: ['params.k'] });
    const err = errorOf(() => compileCatalogue(layers('queries:\n  p:\n    sql: SELECT 1 AS value\n    params: [k]\n'), DBS));
    expect({ file: err.file, key: err.key, value: err.value }).toEqual({ file: OVER, key: 'params', value: 'k' });
  });

  it('binds: null in the override clears the built-in binds', () => {
    const q = compile('queries:\n  p:\n    sql: SELECT 2 AS value\n    binds: null\n').get('p');
    expect({ sql: q?.sql, binds: q?.binds }).toEqual({ sql: 'SELECT 2 AS value', binds: {} });
  });

  it('binds: null leaves no built-in bind behind for the new SQL', () => {
    const err = errorOf(() => compile('queries:\n  p:\n    sql: "SELECT {x:UInt8} AS value"\n    binds: null\n'));
    expect(err.message).toContain('"{x:…}" is a placeholder that is neither a param nor a bind');
  });

  it('a bind the override itself set without a placeholder still names the override', () => {
    const err = errorOf(() => compile('queries:\n  p:\n    binds: {extra: 1}\n'));
    expect({ file: err.file, key: err.key, value: err.value }).toEqual({ file: OVER, key: 'binds', value: 'extra' });
  });
});

describe('the configured API-key parameter is reserved (issue 9 item 12)', () => {
  it('a query may not declare it: the key would be bound and cached', () => {
    const layers = [parseCatalogueText('queries:\n  p: {sql: "SELECT {shim_key:String} AS value", params: [shim_key]}\n', OVER)];
    const err = errorOf(() => compileCatalogue(layers, { ...DBS, reservedParams: ['shim_key'] }));
    expect({ file: err.file, key: err.key, value: err.value }).toEqual({ file: OVER, key: 'params', value: 'shim_key' });
    expect([...compileCatalogue(layers, DBS).keys()]).toEqual(['p']);
  });
});
