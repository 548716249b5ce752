import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseControlPlaneRecord, readControlPlaneRecord, renderControlPlaneSection } from '../../bench/control-plane-doc.js';
import { README_TABLE_END, README_TABLE_START, readmeTable, renderPerformanceDoc, withReadmeTable, type PerformanceRecord } from '../../bench/docs.js';
import { chartShimMemoryRequest } from '../../bench/pod-bench.js';
import { formatLine, formatSpread, runPassed, spread, type BenchLine } from '../../bench/report.js';
import { REPO } from '../helpers/tools.js';

/**
 * The bench's figures reach the docs only through a full run: docs/performance.md and the
 * README's table are renderings of docs/performance.json, never typed by hand; the page's
 * "On a real control plane" section renders docs/control-plane.json, the e2e lane's figures.
 * When a check here fails after either JSON file changed: `npm run docs:performance`.
 */
const record = JSON.parse(readFileSync(join(REPO, 'docs', 'performance.json'), 'utf8')) as PerformanceRecord;
const controlPlane = readControlPlaneRecord(REPO);

describe('the last full run in the docs', () => {
  it('docs/performance.md is docs/performance.json and docs/control-plane.json rendered (else: npm run docs:performance)', () => {
    expect(readFileSync(join(REPO, 'docs', 'performance.md'), 'utf8')).toBe(renderPerformanceDoc(record, controlPlane));
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

describe("the e2e lane's figures (docs/control-plane.json)", () => {
  it('are committed, and their section states the versions, the HPA sync period, the polling interval and every figure', () => {
    expect(controlPlane).toBeDefined();
    const r = controlPlane!;
    const section = renderControlPlaneSection(r);
    const md = readFileSync(join(REPO, 'docs', 'performance.md'), 'utf8');
    expect(md).toContain('\n## On a real control plane\n');
    expect(md.endsWith(section)).toBe(true);
    expect(section).toContain(`Kubernetes ${r.versions.kubernetes}, etcd ${r.versions.etcd}, KEDA ${r.versions.keda}`);
    expect(section).toContain(`HPA sync period ${r.hpaSyncSeconds} s`);
    expect(section).toContain(`\`pollingInterval\` ${r.pollingIntervalSeconds} s`);
    expect(section).toContain(`load average at start ${r.loadAverage.atStart.toFixed(1)}`);
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    expect(section).toContain(`| value change: 5 → 9 due, 3 → 5 replicas | ${s(r.metricsApi.valueChangeMs)} | ${s(r.externalPush.valueChangeMs)} |`);
    expect(section).toContain(`| \`run-now\` at 0 replicas → 1 (from the CLI's return) | ${s(r.metricsApi.runNowMs)} | ${s(r.externalPush.runNowMs)} |`);
    expect(section).toContain(`up in ${s(r.startMs)}`);
    expect(section).toContain(`${r.rssMiB.atStart} MiB at start`);
  });

  it('a page without them has no such section; a bad record is an error naming the file and the key', () => {
    expect(renderPerformanceDoc(record)).not.toContain('On a real control plane');
    const bad = JSON.stringify({ ...controlPlane, hpaSyncSeconds: 'two' });
    expect(() => parseControlPlaneRecord(bad, 'docs/control-plane.json')).toThrow(/^docs\/control-plane\.json: key "hpaSyncSeconds": /);
    expect(() => parseControlPlaneRecord('{', 'docs/control-plane.json')).toThrow(/^docs\/control-plane\.json: not JSON/);
  });
});

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
