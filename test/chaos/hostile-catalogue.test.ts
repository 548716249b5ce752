import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { yamlScalar, yamlValue } from '../helpers/arbitraries.js';
import { afterAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { defaultBuiltinPath, loadCatalogue } from '../../src/catalogue/load.js';
import { RAW_QUERY_KEYS } from '../../src/catalogue/schema.js';
import { systemClock } from '../../src/clock.js';
import { DfeError } from '../../src/errors.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

/**
 * Hostile override catalogues (the ConfigMap an operator edits) through the
 * production loader: random text, random YAML of catalogue-like shape, and
 * random edits of a valid file. Each one either loads into a catalogue or
 * fails with a DfeError that names the file it came from; no other exception
 * type may escape (a TypeError here would crash startup or a reload).
 */
const dir = mkdtempSync(join(tmpdir(), 'dfe-hostile-cat-'));
const overridePath = join(dir, 'override.yaml');
const builtinPath = defaultBuiltinPath();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Outcome = { kind: 'loaded'; names: string[] } | { kind: 'rejected'; error: DfeError };

async function load(text: string): Promise<Outcome> {
  writeFileSync(overridePath, text);
  try {
    const catalogue = await loadCatalogue({ builtinPath, overridePath, dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS, clock: systemClock });
    return { kind: 'loaded', names: [...catalogue.queries.keys()] };
  } catch (err) {
    // Anything but a DfeError fails the property right here, with its type in the message.
    if (!(err instanceof DfeError)) throw new Error(`a ${(err as Error)?.constructor?.name ?? typeof err} escaped: ${String(err)}`);
    return { kind: 'rejected', error: err };
  }
}

function expectNamesAFile(outcome: Outcome): void {
  if (outcome.kind === 'loaded') {
    for (const name of outcome.names) expect(name).toMatch(/^[A-Za-z0-9_-]+$/);
    return;
  }
  const { error } = outcome;
  expect(['CATALOGUE_INVALID', 'CATALOGUE_MISSING']).toContain(error.code);
  // The file at fault: the override, or the built-in when a merged rule spans both.
  expect([overridePath, builtinPath]).toContain(error.file);
  expect(error.message.startsWith(`${error.file}:`)).toBe(true);
}

const scalar = yamlScalar(['data', 'otel', 'SELECT 1 AS value', 'SELECT {service:String}', '__DB__', '__PRESSURE_MATCH__', 'hunt_backlog', 'Value', '.inf', -1, 0, 1e308]);
const value = yamlValue(scalar, 4);
const queryBody = fc.dictionary(fc.oneof(fc.constantFrom(...RAW_QUERY_KEYS), fc.string({ maxLength: 12 })), value, { maxKeys: 6 });
const queryName = fc.oneof(fc.constantFrom('pressure', 'backlog', 'jobs', 'q-1'), fc.string({ maxLength: 15 }));
const catalogueLike = fc.oneof(
  fc.record({ queries: fc.dictionary(queryName, fc.oneof(queryBody, value), { maxKeys: 3 }) }),
  fc.dictionary(fc.string({ maxLength: 10 }), value, { maxKeys: 3 }),
  value,
);

const VALID = `queries:
  jobs:
    database: data
    params: [service]
    binds: {window_seconds: 60}
    sql: "SELECT count() AS value FROM __DB__.jobs WHERE s = {service:String} AND w > {window_seconds:UInt32}"
    clamp_min: 0
    clamp_max: 100
    deadline_ms: 500
    timeout_seconds: 2
  pressure:
    clamp_max: 50
  backlog:
    enabled: false
`;

describe('hostile override catalogues', () => {
  it('the valid base file loads (so the mutations below start from something real)', async () => {
    const outcome = await load(VALID);
    expect(outcome.kind).toBe('loaded');
  });

  it('random text: loads or a DfeError naming the file', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 200 })), async (text) => {
        expectNamesAFile(await load(text));
      }),
      { numRuns: 200 },
    );
  });

  it('random YAML of catalogue-like shape: loads or a DfeError naming the file', async () => {
    await fc.assert(
      fc.asyncProperty(catalogueLike, async (doc) => {
        expectNamesAFile(await load(YAML.stringify(doc)));
      }),
      { numRuns: 300 },
    );
  });

  it('known-nasty files: alias bomb, deep nesting, huge, NUL bytes, BOM, duplicate keys, tabs', async () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
      .concat(Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`))
      .join('\n');
    const nasty = [
      `${bomb}\nqueries:\n  q:\n    sql: *j\n`,
      `queries: ${'['.repeat(5_000)}${']'.repeat(5_000)}\n`,
      `queries:\n${Array.from({ length: 2_000 }, (_, i) => `  q${i}:\n    sql: "SELECT ${i} AS value"\n`).join('')}`,
      `queries:\n  q:\n    sql: "SELECT 1 AS value ${'x'.repeat(1_000_000)}"\n`,
      'queries:\n  q:\n    sql: "SELECT \u0000 1"\n\u0000\u0000',
      '\uFEFFqueries:\n  q:\n    sql: "SELECT 1 AS value"\n',
      'queries:\n  q:\n    sql: "SELECT 1 AS value"\n  q:\n    sql: "SELECT 2 AS value"\n',
      'queries:\n\tq:\n\t\tsql: "SELECT 1"\n',
      'queries:\n  q:\n    sql: !!js/function "function () { return 1 }"\n',
      'queries:\n  __proto__:\n    sql: "SELECT 1 AS value"\n  constructor:\n    cold_hold: 5\n',
    ];
    const outcomes = [];
    for (const text of nasty) {
      const outcome = await load(text);
      expectNamesAFile(outcome);
      outcomes.push(outcome.kind);
    }
    // The alias bomb must be refused, not expanded (9^10 strings).
    expect(outcomes[0]).toBe('rejected');
  });

  it('random edits of a valid file: loads or a DfeError naming the file', async () => {
    const edit = fc.record({
      at: fc.nat({ max: VALID.length }),
      cut: fc.nat({ max: 12 }),
      insert: fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom(':', '\n  ', '- ', '{', '"', "'", '#', '&a', '*a', '!!binary', '\t')),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(edit, { minLength: 1, maxLength: 4 }), async (edits) => {
        let text = VALID;
        for (const e of edits) {
          const at = Math.min(e.at, text.length);
          text = text.slice(0, at) + e.insert + text.slice(at + e.cut);
        }
        expectNamesAFile(await load(text));
      }),
      { numRuns: 300 },
    );
  });
});
