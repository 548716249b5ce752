/**
 * Writes charts/dfe-keda-shim/README.md from README.tmpl.md and the comments of values.yaml,
 * the way helm-docs does (a table of every value: key, type, default, description), without
 * downloading a tool. The comment block right above a key (or after its value on the same
 * line) is its description; a commented section (an object with keys under it) gets a row of
 * its own. test/chart/readme.test.ts fails when README.md is out of date.
 *
 *   npm run chart:readme
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isMap, isScalar, parse, parseDocument, type Node, type YAMLMap } from 'yaml';

/** The chart directory, from the source (scripts/dev) or the build (dist/scripts/dev). */
export const CHART_DIR = [resolve(import.meta.dirname, '..', '..'), resolve(import.meta.dirname, '..', '..', '..')]
  .map((dir) => join(dir, 'charts', 'dfe-keda-shim'))
  .find((dir) => existsSync(join(dir, 'Chart.yaml')))!;

export interface ValueRow {
  readonly key: string;
  readonly type: string;
  /** The default as JSON, or '' for a section row. */
  readonly defaultJson: string;
  readonly description: string;
  readonly section: boolean;
}

const typeOf = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'list' : typeof value === 'object' ? 'object' : typeof value === 'number' ? (Number.isInteger(value) ? 'int' : 'float') : typeof value;

/** The last paragraph of a comment (a blank line ends a file header or an unrelated note), one line. */
const clean = (comment: string | null | undefined): string => {
  const lines = (comment ?? '').split('\n').map((line) => line.replace(/^\s*-- ?/, '').trim());
  const lastBlank = lines.lastIndexOf('', lines.length - 2);
  return lines
    .slice(lastBlank + 1)
    .filter((line) => line !== '')
    .join(' ');
};

/** Every documented row of a values.yaml text, in file order. */
export function valueRows(valuesText: string): ValueRow[] {
  const doc = parseDocument(valuesText);
  if (doc.errors.length > 0) throw new Error(`values.yaml: ${doc.errors[0]!.message}`);
  const rows: ValueRow[] = [];
  const walk = (map: YAMLMap, prefix: string): void => {
    map.items.forEach((pair, index) => {
      const keyNode = pair.key as Node;
      const key = prefix + String(isScalar(keyNode) ? keyNode.value : keyNode);
      const valueNode = pair.value as Node | null;
      // The first key's comment is stored on its map, except at the top, where it is the file's header.
      const before = keyNode.commentBefore ?? (index === 0 && prefix !== '' ? map.commentBefore : undefined);
      const description = [clean(before), clean(valueNode?.comment)].filter(Boolean).join(' ');
      if (isMap(valueNode) && valueNode.items.length > 0) {
        if (description) rows.push({ key, type: 'object', defaultJson: '', description, section: true });
        walk(valueNode, `${key}.`);
        return;
      }
      const value = valueNode ? (valueNode.toJSON() as unknown) : null;
      rows.push({ key, type: typeOf(value), defaultJson: JSON.stringify(value), description, section: false });
    });
  };
  if (isMap(doc.contents)) walk(doc.contents, '');
  return rows;
}

/** Leaf keys whose description is empty and which no commented section above them explains. */
export function undocumented(rows: readonly ValueRow[]): string[] {
  const sections = new Set(rows.filter((r) => r.section).map((r) => r.key));
  return rows
    .filter((r) => !r.section && r.description === '')
    .filter((r) => !r.key.split('.').some((_, i, parts) => sections.has(parts.slice(0, i).join('.'))))
    .map((r) => r.key);
}

const cell = (text: string): string => text.replace(/\|/g, '\\|');

export function valuesTable(rows: readonly ValueRow[]): string {
  const lines = ['| Key | Type | Default | Description |', '|-----|------|---------|-------------|'];
  for (const row of rows) {
    const shown = row.section ? '' : `\`${cell(row.defaultJson)}\``;
    lines.push(`| \`${row.key}\` | ${row.type} | ${shown} | ${cell(row.description)} |`);
  }
  return lines.join('\n');
}

/** README.md as it should be: the template with its placeholders filled. */
export function renderReadme(chartDir = CHART_DIR): string {
  const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { name: string; version: string; appVersion: string; description: string; kubeVersion: string };
  const template = readFileSync(join(chartDir, 'README.tmpl.md'), 'utf8');
  const rows = valueRows(readFileSync(join(chartDir, 'values.yaml'), 'utf8'));
  const fill: Record<string, string> = {
    name: chart.name,
    version: chart.version,
    appVersion: chart.appVersion,
    description: chart.description.trim(),
    kubeVersion: chart.kubeVersion,
    valuesTable: valuesTable(rows),
  };
  return template.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, name: string) => {
    const value = fill[name];
    if (value === undefined) throw new Error(`README.tmpl.md: unknown placeholder ${whole}`);
    return value;
  });
}

function main(): void {
  const out = join(CHART_DIR, 'README.md');
  writeFileSync(out, renderReadme());
  process.stdout.write(`wrote ${out}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
