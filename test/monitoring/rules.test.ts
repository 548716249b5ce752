/**
 * The alert rules with the real promtool: `check rules` on monitoring/alerts.yaml, `test rules`
 * on monitoring/alerts.test.yaml (input series per alert: fires when it should, silent when it
 * should not), that every alert has both kinds of case and a runbook section, and that the
 * plain file is the chart's PrometheusRule at the default values.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parse } from 'yaml';
import { alertsFileText, renderChartRules, type RuleFile } from '../../scripts/dev/alert-rules.js';
import { REPO, missing, tools } from '../helpers/tools.js';
import { promtoolMissing, runPromtool } from './promtool.js';
import { needs } from '../helpers/requirement.js';

const MONITORING = join(REPO, 'monitoring');
const alertsText = readFileSync(join(MONITORING, 'alerts.yaml'), 'utf8');
const rules = parse(alertsText) as RuleFile;
const alerts = rules.groups.flatMap((g) => g.rules).filter((r) => typeof r.alert === 'string') as { alert: string; expr: string; annotations: Record<string, string> }[];

interface UnitTests {
  tests: { name: string; alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
}
const unitTests = parse(readFileSync(join(MONITORING, 'alerts.test.yaml'), 'utf8')) as UnitTests;

const scratch = mkdtempSync(join(tmpdir(), 'dfe-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

it('the issue\'s alerts are all there', () => {
  expect(alerts.map((a) => a.alert).sort()).toEqual([
    'DfeHuntAutoDisabled',
    'DfeHuntBacklogGrowing',
    'DfeHuntCatchupSkipped',
    'DfeHuntFireLate',
    'DfeHuntLeaseLost',
    'DfeHuntRunnerHeartbeatMissing',
    'DfeMaterialiseJobFailed',
    'DfeShimAnsweringStale',
    'DfeShimCatalogueReloadRejected',
    'DfeShimClickHouseFailing',
    'DfeShimServingHeld',
  ]);
});

it('every alert has a unit test where it fires and one where it stays silent', () => {
  const evals = unitTests.tests.flatMap((t) => t.alert_rule_test ?? []);
  const coverage = alerts.map((a) => {
    const mine = evals.filter((e) => e.alertname === a.alert);
    return { alert: a.alert, fires: mine.some((e) => (e.exp_alerts ?? []).length > 0), silent: mine.some((e) => (e.exp_alerts ?? []).length === 0) };
  });
  expect(coverage.filter((c) => !c.fires || !c.silent)).toEqual([]);
  console.info(`[alert rules] ${alerts.length} alerts, ${unitTests.tests.length} promtool unit tests, ${evals.length} evaluations`);
});

it('every alert points at its runbook section in docs/operations.md', () => {
  const doc = readFileSync(join(REPO, 'docs', 'operations.md'), 'utf8');
  // GitHub's heading anchors: lower case, spaces to dashes, punctuation dropped.
  const anchors = new Set([...doc.matchAll(/^#{2,4} (.+)$/gm)].map((m) => m[1]!.trim().toLowerCase().replace(/[^\w\s-]/g, '').replace(/\s+/g, '-')));
  for (const alert of alerts) {
    const anchor = alert.annotations.runbook?.split('#')[1];
    expect(anchor, alert.alert).toBe(alert.alert.toLowerCase());
    expect(anchors.has(anchor!), `docs/operations.md has no "${alert.alert}" section`).toBe(true);
  }
});

needs(missing('helm')).describe('monitoring/alerts.yaml and the chart', () => {
  it('is the chart\'s PrometheusRule at the default values (regenerate: npm run monitoring:rules)', () => {
    const chart = renderChartRules(tools.helm!);
    expect(rules).toEqual(chart);
    expect(alertsText).toBe(alertsFileText(chart));
  });
});

needs(promtoolMissing()).describe('promtool', () => {
  it('check rules: the file is valid and lint-clean', () => {
    const result = runPromtool(['check', 'rules', '--lint=all', '--lint-fatal', join(MONITORING, 'alerts.yaml')]);
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain(`SUCCESS: ${alerts.length} rules found`);
  });

  it('test rules: every alert fires on its series and stays silent on the others', () => {
    const result = runPromtool(['test', 'rules', join(MONITORING, 'alerts.test.yaml')]);
    expect(result.status, result.output).toBe(0);
    expect(result.output).toMatch(/SUCCESS/);
  });

  it('the unit tests can fail: a looser threshold breaks them', () => {
    cpSync(join(MONITORING, 'alerts.test.yaml'), join(scratch, 'alerts.test.yaml'));
    writeFileSync(join(scratch, 'alerts.yaml'), alertsText.replace('for: 60m', 'for: 90m').replace('> 0.25', '> 0.75'));
    const result = runPromtool(['test', 'rules', join(scratch, 'alerts.test.yaml')]);
    expect(result.status, result.output).not.toBe(0);
    expect(result.output).toContain('DfeShimServingHeld');
    expect(result.output).toContain('DfeShimClickHouseFailing');
  });
});
