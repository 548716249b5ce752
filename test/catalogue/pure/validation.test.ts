import { describe, expect, it } from 'vitest';
import { compileCatalogue } from '../../../src/catalogue/compile.js';
import { parseCatalogueText } from '../../../src/catalogue/parse.js';
import { DfeError } from '../../../src/errors.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../../src/shim/catalogue-builtins.js';

/**
 * docs/catalogue.md#validation, one test per rule. Every error is CATALOGUE_INVALID and
 * its message names the file, the query and the key (and the bad value).
 */
const BASE = 'queries.yaml';
const OVER = 'queries.override.yaml';
const DBS = { dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS };
const GOOD_BASE = `
queries:
  ok:
    sql: SELECT 1 AS value
`;

function compile(override: string, base = GOOD_BASE) {
  return compileCatalogue([parseCatalogueText(base, BASE), parseCatalogueText(override, OVER)], DBS);
}

interface Expected {
  readonly file?: string;
  readonly query?: string;
  readonly key?: string;
  readonly says: string;
}

/** The one assertion of each rule: code, file, query, key and the gist of the message. */
function expectInvalid(override: string, expected: Expected, base = GOOD_BASE): void {
  let caught: unknown;
  try {
    compile(override, base);
  } catch (err) {
    caught = err;
  }
  const err = caught as DfeError;
  const file = expected.file ?? OVER;
  const prefix = [`${file}:`, expected.query && ` query "${expected.query}"`, expected.key && ` key "${expected.key}"`].filter(Boolean).join('');
  expect({ isDfe: caught instanceof DfeError, code: err?.code, starts: err?.message.startsWith(prefix), says: err?.message.includes(expected.says), message: err?.message }).toEqual({
    isDfe: true,
    code: 'CATALOGUE_INVALID',
    starts: true,
    says: true,
    message: err?.message,
  });
}

describe('catalogue file shape', () => {
  it('YAML syntax error names the file and line', () => expectInvalid('queries:\n  a: [1\n b: 2\n', { says: 'is not valid YAML' }));
  it('a query defined twice in one file is a YAML error', () =>
    expectInvalid('queries:\n  a: {sql: x}\n  a: {sql: y}\n', { says: 'Map keys must be unique' }));
  it('the document must be a mapping', () => expectInvalid('- a\n', { says: 'must be a mapping with a top-level "queries" key' }));
  it('unknown top-level keys are rejected', () => expectInvalid('query: {}\n', { key: 'query', says: 'is not a known top-level key' }));
  it('"queries" must be a mapping', () => expectInvalid('queries: [a]\n', { key: 'queries', says: '["a"] must be a mapping' }));
  it('a query must be a mapping', () => expectInvalid('queries:\n  a: SELECT 1\n', { query: 'a', says: '"SELECT 1" must be a mapping of keys' }));
  it('query names are [A-Za-z0-9_-]+', () => expectInvalid('queries:\n  "a b": {sql: x}\n', { query: 'a b', says: 'is not a valid query name' }));
  it('an intentional empty override says queries: {} and changes nothing', () => expect([...compile('queries: {}\n').keys()]).toEqual(['ok']));
  it.each([
    ['0 bytes', ''],
    ['blank', '  \n\n'],
    ['comments only', '# truncated\n'],
  ])('an override with no content (%s) is not a catalogue', (_what, text) => expectInvalid(text, { says: 'has no content' }));
  it('queries: with nothing under it is not a catalogue either', () => expectInvalid('queries:\n', { key: 'queries', says: 'write "queries: {}"' }));
});

describe('keys and types (per file, strict)', () => {
  const q = (body: string) => `queries:\n  foo:\n    sql: SELECT 1\n${body}`;
  it('unknown keys are rejected', () => expectInvalid(q('    clampmax: 1\n'), { query: 'foo', key: 'clampmax', says: '1 is not a known key' }));
  it('builtin is only hunt_backlog', () =>
    expectInvalid('queries:\n  foo: {builtin: due_count}\n', { query: 'foo', key: 'builtin', says: '"due_count" must be one of: hunt_backlog' }));
  it('database is data, otel or a valid literal name', () =>
    expectInvalid(q('    database: "a.b"\n'), { query: 'foo', key: 'database', says: '"a.b" must be data, otel or a database name' }));
  it('params are identifiers', () =>
    expectInvalid(q('    params: [ok, "bad-name"]\n'), { query: 'foo', key: 'params[1]', says: '"bad-name" must be an identifier' }));
  it('"hold" is a reserved param', () => expectInvalid(q('    params: [hold]\n'), { query: 'foo', key: 'params[0]', says: '"hold" is reserved' }));
  it('"api_key" is a reserved param', () => expectInvalid(q('    params: [api_key]\n'), { query: 'foo', key: 'params[0]', says: '"api_key" is reserved' }));
  it('a param is listed once', () => expectInvalid(q('    params: [a, a]\n'), { query: 'foo', key: 'params', says: 'lists a parameter twice' }));
  it('bind names are identifiers', () =>
    expectInvalid(q('    binds: {"bad-name": 1}\n'), { query: 'foo', key: 'binds.bad-name', says: 'is not a valid bind name' }));
  it('bind values are strings, finite numbers or booleans', () =>
    expectInvalid(q('    binds: {w: null}\n'), { query: 'foo', key: 'binds.w', says: 'null must be a string, a finite number or a boolean' }));
  it('result_field is a non-negative integer', () =>
    expectInvalid(q('    result_field: -1\n'), { query: 'foo', key: 'result_field', says: '-1 must be a column index' }));
  it('result_field is not a fraction', () =>
    expectInvalid(q('    result_field: 1.5\n'), { query: 'foo', key: 'result_field', says: '1.5 must be a column index' }));
  it('clamp bounds are finite numbers', () =>
    expectInvalid(q('    clamp_max: .inf\n'), { query: 'foo', key: 'clamp_max', says: 'Infinity must be a finite number' }));
  it('cold_hold is a number ≥ 0 (answers are ≥ 0)', () =>
    expectInvalid(q('    cold_hold: -1\n'), { query: 'foo', key: 'cold_hold', says: '-1 must be ≥ 0' }));
  it('cold_hold is a number, not a string', () =>
    expectInvalid(q('    cold_hold: "0"\n'), { query: 'foo', key: 'cold_hold', says: '"0" must be a number' }));
  it('timeout_seconds is positive', () =>
    expectInvalid(q('    timeout_seconds: 0\n'), { query: 'foo', key: 'timeout_seconds', says: '0 must be greater than 0' }));
  it('deadline_ms is positive', () =>
    expectInvalid(q('    deadline_ms: -5\n'), { query: 'foo', key: 'deadline_ms', says: '-5 must be greater than 0' }));
  it('metric_type is AverageValue or Value', () =>
    expectInvalid(q('    metric_type: value\n'), { query: 'foo', key: 'metric_type', says: '"value" must be AverageValue or Value' }));
  it('fresh_for_seconds is ≥ 0', () =>
    expectInvalid(q('    fresh_for_seconds: -1\n'), { query: 'foo', key: 'fresh_for_seconds', says: '-1 must be ≥ 0' }));
  it('max_stale_seconds is null or > 0', () =>
    expectInvalid(q('    max_stale_seconds: 0\n'), { query: 'foo', key: 'max_stale_seconds', says: '0 must be greater than 0' }));
  it('enabled is a boolean', () => expectInvalid(q('    enabled: "no"\n'), { query: 'foo', key: 'enabled', says: '"no" must be true or false' }));
  it('sql is not empty', () => expectInvalid('queries:\n  foo: {sql: "  "}\n', { query: 'foo', key: 'sql', says: 'must not be empty' }));
  it('a type error in the built-in file names the built-in file', () =>
    expectInvalid('', { file: BASE, query: 'b', key: 'cold_hold', says: 'must be' }, 'queries:\n  b: {sql: x, cold_hold: x}\n'));
});

describe('rules on the merged query', () => {
  it('a query needs sql or builtin', () => expectInvalid('queries:\n  foo: {cold_hold: 1}\n', { query: 'foo', key: 'sql', says: 'is missing' }));
  it('sql and builtin together are rejected', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1, builtin: hunt_backlog}\n', { query: 'foo', key: 'builtin', says: 'cannot be set together with sql' }));
  it('clamp_min > clamp_max is rejected', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1, clamp_min: 5, clamp_max: 1}\n', { query: 'foo', key: 'clamp_min', says: '5 is greater than clamp_max 1' }));
  it('a clamp clash across files names the override, which caused it', () =>
    expectInvalid('queries:\n  ok: {clamp_max: 1}\n', { query: 'ok', key: 'clamp_max', says: '1 is less than clamp_min 5' }, 'queries:\n  ok: {sql: SELECT 1, clamp_min: 5}\n'));
  it('deadline_ms must be < timeout_seconds × 1000', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1, timeout_seconds: 2, deadline_ms: 2000}\n', { query: 'foo', key: 'deadline_ms', says: '2000 must be less than timeout_seconds × 1000 (2000 ms)' }));
  it('a timeout under the default deadline names timeout_seconds', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1, timeout_seconds: 1}\n', { query: 'foo', key: 'timeout_seconds', says: '1 must be more than deadline_ms / 1000 (deadline_ms 2000, the default)' }));
  it('unknown __SENTINEL__s are rejected', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1 FROM __DB__.t WHERE __PRESURE_MATCH__}\n', { query: 'foo', key: 'sql', says: 'uses unknown sentinel __PRESURE_MATCH__' }));
  it('each param has a {name:Type} placeholder in the SQL', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1, params: [service]}\n', { query: 'foo', key: 'params', says: '"service" has no {service:Type} placeholder' }));
  it('each bind has a {name:Type} placeholder in the SQL', () =>
    expectInvalid('queries:\n  foo: {sql: SELECT 1, binds: {w: 60}}\n', { query: 'foo', key: 'binds', says: '"w" has no {w:Type} placeholder' }));
  it('each placeholder is a param or a bind', () =>
    expectInvalid('queries:\n  foo: {sql: "SELECT {w:UInt32}"}\n', { query: 'foo', key: 'sql', says: 'is a placeholder that is neither a param nor a bind' }));
  it('a builtin takes no params (its SQL has no placeholders)', () =>
    expectInvalid('queries:\n  foo: {builtin: hunt_backlog, params: [x]}\n', { query: 'foo', key: 'params', says: '"x" has no {x:Type} placeholder' }));
  it('a disabled query is not checked against the cross-key rules', () =>
    expect([...compile('queries:\n  foo: {clamp_min: 5, clamp_max: 1, enabled: false}\n').keys()]).toEqual(['ok']));
});

describe('the servable range (what KEDA and the HPA can carry, docs/failsafe.md)', () => {
  it.each([
    ['cold_hold', '1e16', '10000000000000000'],
    ['cold_hold', '9223372036854775', '9223372036854776'],
    ['clamp_max', '1e306', '1e+306'],
    ['clamp_min', '-1e19', '-10000000000000000000'],
  ])('%s: %s is rejected, naming file, query, key and value', (key, yamlValue, shown) =>
    expectInvalid(`queries:\n  foo: {sql: SELECT 1, ${key}: ${yamlValue}}\n`, { query: 'foo', key, says: `${shown} is outside the servable range` }));
  it('the largest servable value loads', () => {
    const q = compile('queries:\n  foo: {sql: SELECT 1, cold_hold: 9223372036854774, clamp_min: -9223372036854774}\n').get('foo');
    expect(q?.coldHold).toBe(9_223_372_036_854_774);
  });
});

describe('warnings at load (the catalogue loads; the log says)', () => {
  it('deadline_ms at or past KEDA’s default HTTP timeout (3000 ms) warns, naming file, query and value', () => {
    const catalogue = compile('queries:\n  slow: {sql: SELECT 1, deadline_ms: 3000, timeout_seconds: 10}\n  fine: {sql: SELECT 1, deadline_ms: 2999}\n');
    expect(catalogue.get('fine')?.warnings).toBeUndefined();
    expect(catalogue.get('slow')?.warnings).toEqual([
      expect.objectContaining({ file: OVER, query: 'slow', key: 'deadline_ms', value: 3000, message: expect.stringContaining(`${OVER}: query "slow" key "deadline_ms": 3000 is at or above KEDA's default HTTP timeout`) }),
    ]);
  });
  it('names the built-in file when the built-in set it', () => {
    const catalogue = compile('queries:\n  b: {cold_hold: 1}\n', 'queries:\n  b: {sql: SELECT 1, deadline_ms: 4000, timeout_seconds: 5}\n');
    expect(catalogue.get('b')?.warnings?.[0]).toMatchObject({ file: BASE, value: 4000 });
  });
});
