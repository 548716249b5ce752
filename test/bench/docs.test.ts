import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { README_TABLE_END, README_TABLE_START, readmeTable, renderPerformanceDoc, withReadmeTable, type PerformanceRecord } from '../../bench/docs.js';
import { chartShimMemoryRequest } from '../../bench/pod-bench.js';
import { formatLine, formatSpread, runPassed, spread, type BenchLine } from '../../bench/report.js';
import { REPO } from '../helpers/tools.js';

/**
 * The bench's figures reach the docs only through a full run: docs/performance.md and the
 * README's table are renderings of docs/performance.json, never typed by hand.
 */
const record = JSON.parse(readFileSync(join(REPO, 'docs', 'performance.json'), 'utf8')) as PerformanceRecord;

describe('the last full run in the docs', () => {
  it('docs/performance.md is docs/performance.json rendered', () => {
    expect(readFileSync(join(REPO, 'docs', 'performance.md'), 'utf8')).toBe(renderPerformanceDoc(record));
  });

  it("the README's performance table is docs/performance.json rendered", () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf(README_TABLE_START), readme.indexOf(README_TABLE_END) + README_TABLE_END.length);
    expect(table).toBe(readmeTable(record));
    expect(record.lines.length).toBeGreaterThan(0);
  });

  it('the README without its markers is an error naming them', () => {
    expect(() => withReadmeTable('# no table here\n', record)).toThrow(/bench-table markers are missing/);
  });

  it("the pod goals read the chart's memory request", () => {
    expect(chartShimMemoryRequest()).toBe(160 * 2 ** 20);
  });
});

const figure = (outcome: 'met' | 'NOT met' | 'n/a', extra: Partial<BenchLine> = {}): BenchLine => ({
  kind: 'figure', name: `f ${outcome}`, measured: 'x | y', baseline: 'b', goal: 'g', outcome, ...extra,
} as BenchLine);

describe('the verdict', () => {
  it('passes only when every goal is met and nothing was skipped', () => {
    expect(runPassed([figure('met'), figure('n/a')])).toBe(true);
    expect(runPassed([figure('met'), figure('NOT met')])).toBe(false);
    expect(runPassed([figure('met'), { kind: 'skipped', name: 'pod', reason: 'no server' }])).toBe(false);
    expect(runPassed([])).toBe(false);
  });

  it('a spread is min / median / max of the rounds, printed after the line', () => {
    const s = spread([9, 1, 5, 7, 3], 'cycle CPU', 'ms');
    expect(s).toEqual({ label: 'cycle CPU', unit: 'ms', min: 1, median: 5, max: 9, rounds: 5 });
    expect(formatSpread(s)).toBe('cycle CPU median 5.00 ms (min 1.00 ms, max 9.00 ms, 5 rounds)');
    expect(formatLine(figure('met', { spreads: [s] } as Partial<BenchLine>))).toBe(
      'f met: x | y | baseline: b | goal: met (g) | spread: cycle CPU median 5.00 ms (min 1.00 ms, max 9.00 ms, 5 rounds)',
    );
    expect(() => spread([], 'none', 'ms')).toThrow(/no rounds/);
  });

  it('a figure without a goal says why; the README table escapes pipes', () => {
    expect(formatLine(figure('n/a', { goal: 'informational' } as Partial<BenchLine>))).toMatch(/goal: n\/a \(informational\)$/);
    const table = readmeTable({ ...record, lines: [figure('met', { headline: 'a | b', shortName: 'short' } as Partial<BenchLine>)] });
    expect(table).toContain('| short | a \\| b | **met**: g |');
  });
});
