import { describe, expect, it } from 'vitest';
import { compileCatalogue } from '../../../src/catalogue/compile.js';
import { parseCatalogueText } from '../../../src/catalogue/parse.js';
import { DfeError } from '../../../src/errors.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../../src/shim/catalogue-builtins.js';

/**
 * issue 9 item 16: an override that replaces a built-in's `sql` while the
 * built-in's `binds` stay is the override's problem (it set the SQL), and
 * `binds: null` in the override clears them.
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
  it('names the override (which set the SQL), the bind, and the way out', () => {
    const err = errorOf(() => compile('queries:\n  p:\n    sql: SELECT 2 AS value\n'));
    expect({ code: err.code, file: err.file, key: err.key, value: err.value }).toEqual({ code: 'CATALOGUE_INVALID', file: OVER, key: 'binds', value: 'w' });
    expect(err.message).toMatch(new RegExp(`^${OVER}: query "p" key "binds": "w" \\(set by ${BASE}\\) has no \\{w:Type\\} placeholder`));
    expect(err.message).toContain('binds: null');
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
