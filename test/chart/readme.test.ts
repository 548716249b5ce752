/**
 * charts/dfe-keda-shim/README.md is generated from README.tmpl.md and the comments of
 * values.yaml (scripts/dev/chart-readme.ts, `npm run chart:readme`): it must be current, and
 * every value must have a description.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderReadme, undocumented, valueRows, valuesTable } from '../../scripts/dev/chart-readme.js';
import { CHART } from '../helpers/tools.js';

const valuesText = readFileSync(join(CHART, 'values.yaml'), 'utf8');

describe('chart README', () => {
  it('is current (regenerate: npm run chart:readme)', () => {
    expect(readFileSync(join(CHART, 'README.md'), 'utf8')).toBe(renderReadme(CHART));
  });

  it('lists every leaf of values.yaml with its default, and every leaf has a description', () => {
    const rows = valueRows(valuesText);
    const leaves = (node: unknown, prefix = ''): [string, unknown][] =>
      node !== null && typeof node === 'object' && !Array.isArray(node) && Object.keys(node).length > 0
        ? Object.entries(node).flatMap(([key, value]) => leaves(value, prefix ? `${prefix}.${key}` : key))
        : [[prefix, node]];
    const expected = leaves(parse(valuesText));
    const listed = rows.filter((r) => !r.section);
    expect(listed.map((r) => r.key)).toEqual(expected.map(([key]) => key));
    listed.forEach((row, i) => expect(JSON.parse(row.defaultJson), row.key).toEqual(expected[i]![1]));
    expect(undocumented(rows)).toEqual([]);
  });

  it('reads comments the helm-docs way: the block above a key, `# --` prefixes, trailing comments, sections', () => {
    const rows = valueRows(
      [
        '# file header, not a value',
        '',
        '# -- Image settings.',
        'image:',
        '  # Repository of the image.',
        '  repository: x',
        '  tag: "" # empty: appVersion',
        '  pullPolicy: IfNotPresent',
        'replicas: 2',
        '',
      ].join('\n'),
    );
    expect(rows).toEqual([
      { key: 'image', type: 'object', defaultJson: '', description: 'Image settings.', section: true },
      { key: 'image.repository', type: 'string', defaultJson: '"x"', description: 'Repository of the image.', section: false },
      { key: 'image.tag', type: 'string', defaultJson: '""', description: 'empty: appVersion', section: false },
      { key: 'image.pullPolicy', type: 'string', defaultJson: '"IfNotPresent"', description: '', section: false },
      { key: 'replicas', type: 'int', defaultJson: '2', description: '', section: false },
    ]);
    // pullPolicy is explained by its section; replicas by nothing.
    expect(undocumented(rows)).toEqual(['replicas']);
    expect(valuesTable(rows.slice(2, 3))).toContain('| `image.tag` | string | `""` | empty: appVersion |');
  });
});
