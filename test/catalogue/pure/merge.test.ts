import { describe, expect, it } from 'vitest';
import { mergeLayers, mergeQuery, mergeValue } from '../../../src/catalogue/merge.js';
import type { Layer } from '../../../src/catalogue/parse.js';
import type { RawQuery } from '../../../src/catalogue/schema.js';

/** docs/catalogue.md#merge-rules, one test per rule, on plain data (no YAML, no I/O). */
const layer = (file: string, queries: Record<string, RawQuery>): Layer => ({ file, queries: new Map(Object.entries(queries)) });
const BASE = 'queries.yaml';
const OVER = 'queries.override.yaml';

function merged(base: Record<string, RawQuery>, over: Record<string, RawQuery>) {
  return mergeLayers([layer(BASE, base), layer(OVER, over)]);
}

describe('merge (docs/catalogue.md#merge-rules)', () => {
  it('maps merge key by key, recursively (binds)', () => {
    const out = merged({ p: { sql: 'x', binds: { a: 1, b: 2 } } }, { p: { binds: { b: 3, c: 'z' } } });
    expect(out.get('p')?.raw.binds).toEqual({ a: 1, b: 3, c: 'z' });
  });

  it('nested maps merge at every depth', () => {
    expect(mergeValue({ a: { b: { c: 1, d: 2 } } }, { a: { b: { d: 3 } } })).toEqual({ a: { b: { c: 1, d: 3 } } });
  });

  it('lists from the override replace, never concatenate', () => {
    const out = merged({ p: { sql: 'x', params: ['a', 'b'] } }, { p: { params: ['c'] } });
    expect(out.get('p')?.raw.params).toEqual(['c']);
  });

  it('scalars from the override replace; keys it does not set stay', () => {
    const out = merged({ p: { sql: 'x', clamp_max: 100, cold_hold: 5 } }, { p: { clamp_max: 50 } });
    expect(out.get('p')?.raw).toEqual({ sql: 'x', clamp_max: 50, cold_hold: 5 });
  });

  it('an explicit null from the override replaces (e.g. clamp_max: null drops the band)', () => {
    const out = merged({ p: { sql: 'x', clamp_max: 100 } }, { p: { clamp_max: null } });
    expect(out.get('p')?.raw.clamp_max).toBeNull();
  });

  it('new names add queries', () => {
    expect([...merged({ a: { sql: 'x' } }, { b: { sql: 'y' } }).keys()]).toEqual(['a', 'b']);
  });

  it('sql in an override replaces a builtin of the same query', () => {
    const out = merged({ backlog: { builtin: 'hunt_backlog', clamp_min: 0 } }, { backlog: { sql: 'SELECT 1' } });
    expect(out.get('backlog')?.raw).toEqual({ sql: 'SELECT 1', clamp_min: 0 });
  });

  it('builtin in an override replaces sql of the same query', () => {
    const out = merged({ q: { sql: 'SELECT 1' } }, { q: { builtin: 'hunt_backlog' } });
    expect(out.get('q')?.raw).toEqual({ builtin: 'hunt_backlog' });
  });

  it('both in one override are kept, for validation to reject', () => {
    expect(mergeQuery({ sql: 'a' }, { sql: 'b', builtin: 'hunt_backlog' })).toEqual({ sql: 'b', builtin: 'hunt_backlog' });
  });

  it('enabled: false removes a query', () => {
    expect([...merged({ a: { sql: 'x' }, b: { sql: 'y' } }, { a: { enabled: false } }).keys()]).toEqual(['b']);
  });

  it('enabled: true in an override brings back a query the built-ins disabled, without the enabled key', () => {
    const out = merged({ a: { sql: 'x', enabled: false } }, { a: { enabled: true } });
    expect(out.get('a')?.raw).toEqual({ sql: 'x' });
  });

  it('records which file each key came from (errors name it)', () => {
    const out = merged({ p: { sql: 'x', clamp_min: 0 } }, { p: { clamp_max: 1 } });
    expect(out.get('p')).toMatchObject({ file: OVER, origin: { sql: BASE, clamp_min: BASE, clamp_max: OVER } });
  });

  it('a "__proto__" map key stays data, never a prototype', () => {
    const over = JSON.parse('{"__proto__": {"polluted": 1}}') as Record<string, unknown>;
    const out = mergeValue({ a: 1 }, over) as Record<string, unknown>;
    expect([Object.hasOwn(out, '__proto__'), ({} as Record<string, unknown>)['polluted']]).toEqual([true, undefined]);
  });

  it('the inputs are not modified', () => {
    const base = { p: { sql: 'x', binds: { a: 1 } } };
    merged(base, { p: { binds: { a: 2 } } });
    expect(base).toEqual({ p: { sql: 'x', binds: { a: 1 } } });
  });
});
