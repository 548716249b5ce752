import { describe, expect, it } from 'vitest';
import { compileCatalogue } from '../../src/catalogue/compile.js';
import { parseCatalogueText } from '../../src/catalogue/parse.js';
import { DfeError } from '../../src/errors.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

/**
 * The `batch:` block (docs/catalogue.md#batch) is validated like every other
 * key: each error is CATALOGUE_INVALID naming the file, the query, the key
 * (`batch.<key>`) and the bad value.
 */
const BASE = 'queries.yaml';
const OVER = 'queries.override.yaml';
const DBS = { dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS };
const BATCHED = `
queries:
  depth:
    params: [queue]
    binds: {min_age: 30}
    sql: "SELECT count() AS value FROM __DB__.jobs WHERE queue = {queue:String} AND age > {min_age:UInt32}"
    batch:
      param: queue
      sql: "SELECT queue, count() FROM __DB__.jobs WHERE queue IN {queue:Array(String)} AND age > {min_age:UInt32} GROUP BY queue"
`;

function compile(override: string, base = BATCHED) {
  return compileCatalogue([parseCatalogueText(base, BASE), parseCatalogueText(override, OVER)], DBS);
}

function failure(override: string, base = BATCHED): string {
  try {
    compile(override, base);
  } catch (err) {
    expect(err).toBeInstanceOf(DfeError);
    expect((err as DfeError).code).toBe('CATALOGUE_INVALID');
    return (err as DfeError).message;
  }
  throw new Error('the catalogue compiled');
}

describe('catalogue batch form', () => {
  it('compiles with its defaults, sentinels replaced, values left as placeholders', () => {
    const q = compile('queries: {}\n').get('depth')!;
    expect(q.batch).toEqual({
      param: 'queue',
      maxSize: 500,
      windowMs: 10,
      sql: 'SELECT queue, count() FROM `dfe`.jobs WHERE queue IN {queue:Array(String)} AND age > {min_age:UInt32} GROUP BY queue',
    });
  });

  it('is part of the fingerprint: changing it drops the cache entries', () => {
    const before = compile('queries: {}\n').get('depth')!.fingerprint;
    expect(compile('queries:\n  depth:\n    batch: {max_size: 50}\n').get('depth')!.fingerprint).not.toBe(before);
  });

  it('batch: null removes it; a query without one has none', () => {
    expect(compile('queries:\n  depth:\n    batch: null\n').get('depth')!.batch).toBeUndefined();
  });

  it('the param must be a declared one', () => {
    expect(failure('queries:\n  depth:\n    batch: {param: tenant}\n')).toBe(
      `${OVER}: query "depth" key "batch.param": "tenant" is not a declared param of the query (params: queue)`,
    );
  });

  it('max_size is a whole number from 1 to 2000', () => {
    expect(failure('queries:\n  depth:\n    batch: {max_size: 0}\n')).toBe(`${OVER}: query "depth" key "batch.max_size": 0 must be a whole number from 1 to 2000`);
    expect(failure('queries:\n  depth:\n    batch: {max_size: 2.5}\n')).toContain('key "batch.max_size": 2.5 must be a whole number');
  });

  it('window_ms is ≥ 0 (0: no linger) and under deadline_ms', () => {
    expect(failure('queries:\n  depth:\n    batch: {window_ms: -1}\n')).toContain('key "batch.window_ms": -1 must be ≥ 0');
    expect(compile('queries:\n  depth:\n    batch: {window_ms: 0}\n').get('depth')!.batch?.windowMs).toBe(0);
    expect(failure('queries:\n  depth:\n    deadline_ms: 100\n    batch: {window_ms: 100}\n')).toBe(
      `${OVER}: query "depth" key "batch.window_ms": 100 must be less than deadline_ms (100 ms)`,
    );
  });

  it('unknown keys inside the block are named with their value', () => {
    expect(failure('queries:\n  depth:\n    batch: {max_batch: 9}\n')).toBe(
      `${OVER}: query "depth" key "batch.max_batch": 9 is not a known key of batch (known: param, max_size, window_ms, sql)`,
    );
  });

  it('the batched param must be bound as an Array', () => {
    const sql = 'SELECT queue, count() FROM __DB__.jobs WHERE queue = {queue:String} AND age > {min_age:UInt32} GROUP BY queue';
    expect(failure(`queries:\n  depth:\n    batch: {sql: "${sql}"}\n`)).toBe(
      `${OVER}: query "depth" key "batch.sql": "queue" must be bound as an array in the batch SQL: {queue:Array(String)}`,
    );
  });

  it('every param and bind has a placeholder in the batch SQL, every placeholder is one', () => {
    const noBind = 'SELECT queue, count() FROM __DB__.jobs WHERE queue IN {queue:Array(String)} GROUP BY queue';
    expect(failure(`queries:\n  depth:\n    batch: {sql: "${noBind}"}\n`)).toBe(`${OVER}: query "depth" key "batch.sql": "min_age" has no {min_age:Type} placeholder in the batch SQL`);
    const stray = `${noBind.replace('GROUP', 'AND age > {min_age:UInt32} AND x = {nope:UInt8} GROUP')}`;
    expect(failure(`queries:\n  depth:\n    batch: {sql: "${stray}"}\n`)).toContain('key "batch.sql": "{nope:…}" is a placeholder that is neither a param nor a bind');
  });

  it('unknown sentinels in the batch SQL are named', () => {
    expect(failure('queries:\n  depth:\n    batch: {sql: "SELECT __NOPE__"}\n')).toContain('key "batch.sql": uses unknown sentinel __NOPE__');
  });

  it('param and sql are required in a new batch', () => {
    const base = 'queries:\n  q:\n    params: [k]\n    sql: "SELECT {k:String}"\n';
    expect(failure('queries:\n  q:\n    batch: {sql: "SELECT 1"}\n', base)).toBe(`${OVER}: query "q" key "batch.param": is missing: name the declared param whose values are batched`);
    expect(failure('queries:\n  q:\n    batch: {param: k}\n', base)).toBe(`${OVER}: query "q" key "batch.sql": is missing: the SQL that answers many keys at once`);
  });

  it('an override that replaces the SQL takes the earlier batch along: one by one, said in a warning', () => {
    const q = compile('queries:\n  depth:\n    sql: "SELECT {queue:String} AS q, {min_age:UInt32} AS a"\n').get('depth')!;
    expect(q.batch).toBeUndefined();
    expect(q.warnings?.map((w) => [w.file, w.key, w.value])).toEqual([[OVER, 'sql', ['batch']]]);
    expect(q.warnings?.[0]?.message).toBe(
      `${OVER}: query "depth" replaces the SQL, so the built-in parts that belonged to the old SQL were dropped: batch (set by ${BASE}); ` +
        'without a batch form it answers each key with its own query. Set them next to the new sql to keep them',
    );
    expect(compile('queries:\n  depth:\n    sql: "SELECT {queue:String} AS q, {min_age:UInt32} AS a"\n    batch: null\n').get('depth')!.warnings).toBeUndefined();
  });

  it('a batch set next to the new SQL applies, alone: nothing of the earlier block merges in', () => {
    const sql = 'SELECT queue, 1 FROM __DB__.jobs WHERE queue IN {queue:Array(String)} AND age > {min_age:UInt32} GROUP BY queue';
    const q = compile(`queries:\n  depth:\n    sql: "SELECT {queue:String} AS q, {min_age:UInt32} AS a"\n    batch: {param: queue, max_size: 7, sql: "${sql}"}\n`).get('depth')!;
    expect({ maxSize: q.batch?.maxSize, warnings: q.warnings }).toEqual({ maxSize: 7, warnings: undefined });
    expect(failure('queries:\n  depth:\n    sql: "SELECT {queue:String} AS q, {min_age:UInt32} AS a"\n    batch: {max_size: 7}\n')).toBe(
      `${OVER}: query "depth" key "batch.param": is missing: name the declared param whose values are batched`,
    );
  });
});
