import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { yamlScalar, yamlValue } from '../helpers/arbitraries.js';
import { afterAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { loadHuntsDir } from '../../src/schedule/hunt-files.js';

/**
 * Hostile hunt definitions through the production loader (docs/hunts.md): next to
 * one good hunt, a file of random text, random hunt-shaped YAML, or a random
 * edit of a valid hunt, under a random file name. Nothing may throw; the bad
 * file is reported invalid (naming the file, a key and a reason) or skipped,
 * and the good hunt always still loads.
 */
const root = mkdtempSync(join(tmpdir(), 'dfe-hostile-hunts-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const GOOD = `schedule: {mode: rate, interval: 5m}
queries:
  - INSERT INTO dfe.detections SELECT * FROM dfe.events WHERE {window}
window_column: _timestamp_load
settings: {max_memory_usage: 4000000000}
`;

let run = 0;

function loadWith(stem: string, text: string) {
  const dir = join(root, `run-${run++}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'good-hunt.yaml'), GOOD);
  const file = join(dir, `${stem}.yaml`);
  writeFileSync(file, text);
  const set = loadHuntsDir(dir, 0.8);
  rmSync(dir, { recursive: true, force: true });
  return { set, file };
}

function expectContained(stem: string, text: string): void {
  const { set, file } = loadWith(stem, text);
  expect(set.hunts.map((h) => h.huntId)).toContain('good-hunt');
  const verdicts = [
    ...set.hunts.filter((h) => h.file === file).map(() => 'hunt'),
    ...set.invalid.filter((i) => i.file === file).map(() => 'invalid'),
    ...set.skipped.filter((s) => s.file === file).map(() => 'skipped'),
  ];
  expect(verdicts).toHaveLength(1);
  for (const bad of set.invalid) {
    expect(bad.file).toBe(file);
    expect(bad.key.length).toBeGreaterThan(0);
    expect(bad.reason.length).toBeGreaterThan(0);
  }
}

// File names a filesystem accepts (no "/" or NUL), including ones that are not valid hunt ids.
const stem = fc.oneof(
  fc.constantFrom('hunt', 'brute-force-ssh', 'ünïcødé', 'a b', '.hidden', '..x', '-', 'x'.repeat(200)),
  fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }).filter((s) => !s.includes('/') && !s.includes('\0') && s !== '.' && s !== '..' && Buffer.byteLength(s) < 200),
);

const scalar = yamlScalar(['rate', 'cron', '5m', '0s', '1h30m', '-5m', '99999999999d', '*/5 * * * *', '{window}', '{window_start:Int64}', 'log_comment']);
const value = yamlValue(scalar, 3);
const huntLike = fc.oneof(
  fc.record(
    {
      schedule: fc.oneof(fc.record({ mode: value, interval: value }, { requiredKeys: [] }), value),
      queries: fc.oneof(fc.array(fc.oneof(fc.string({ maxLength: 40 }), value), { maxLength: 3 }), value),
      window_column: value,
      settings: fc.oneof(fc.dictionary(fc.string({ maxLength: 12 }), value, { maxKeys: 3 }), value),
      extra: value,
    },
    { requiredKeys: [] },
  ),
  value,
);

describe('hostile hunt files', () => {
  it('random text under a random name: contained, the good hunt still loads', () => {
    fc.assert(
      fc.property(stem, fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 200 })), (name, text) => {
        expectContained(name, text);
      }),
      { numRuns: 150 },
    );
  });

  it('random hunt-shaped YAML: contained, the good hunt still loads', () => {
    fc.assert(
      fc.property(stem, huntLike, (name, doc) => {
        expectContained(name, YAML.stringify(doc));
      }),
      { numRuns: 250 },
    );
  });

  it('random edits of a valid hunt: contained, the good hunt still loads', () => {
    const edit = fc.record({
      at: fc.nat({ max: GOOD.length }),
      cut: fc.nat({ max: 10 }),
      insert: fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom(':', '\n  ', '- ', '{', '}', '"', '#', '&a', '*a', '\t', '{window_end:Int64}')),
    });
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 4 }), (edits) => {
        let text = GOOD;
        for (const e of edits) {
          const at = Math.min(e.at, text.length);
          text = text.slice(0, at) + e.insert + text.slice(at + e.cut);
        }
        expectContained('edited', text);
      }),
      { numRuns: 250 },
    );
  });
});
