import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkSummaries, parseAllowList, type TestSummary } from '../../scripts/dev/test-summary.js';
import { REPO, findTool } from '../helpers/tools.js';
import { inCi } from '../helpers/requirement.js';

/**
 * The check that ends .ci/run: a skip passes only when .ci/allowed-skips.json names it with a
 * reason; failures, file errors and an empty run fail it. And the pieces deciding skip vs fail.
 */
const run = (over: Partial<TestSummary> = {}): TestSummary => ({ passed: 10, failed: 0, skipped: [], moduleErrors: [], unhandledErrors: 0, ...over });
const allowed = [{ file: 'test/a.test.ts', name: 'suite > embedded only', why: 'needs the embedded engine' }];

describe('checkSummaries', () => {
  it('passes a run with no skips, and prints each allowed skip with its written reason', () => {
    expect(checkSummaries([run()], allowed).ok).toBe(true);
    const verdict = checkSummaries([run(), run({ skipped: [{ file: 'test/a.test.ts', name: 'suite > embedded only', reason: 'server mode' }] })], allowed);
    expect(verdict.ok).toBe(true);
    expect(verdict.lines).toContain('allowed skip: test/a.test.ts > suite > embedded only — needs the embedded engine (the test said: server mode)');
  });

  it('fails on a skip the allow-list does not name, saying which and why it skipped', () => {
    const verdict = checkSummaries([run({ skipped: [{ file: 'test/chart/chart.test.ts', name: 'helm chart > lint', reason: 'missing helm: run …' }] })], allowed);
    expect(verdict.ok).toBe(false);
    expect(verdict.lines.join('\n')).toMatch(/SKIPPED, not on \.ci\/allowed-skips\.json: test\/chart\/chart\.test\.ts > helm chart > lint — missing helm/);
  });

  it('fails on no summary, failed tests, a file that did not load, unhandled errors, or nothing passing', () => {
    expect(checkSummaries([], allowed).ok).toBe(false);
    expect(checkSummaries([run({ failed: 1 })], allowed).ok).toBe(false);
    expect(checkSummaries([run({ moduleErrors: [{ file: 'x', message: 'boom' }] })], allowed).ok).toBe(false);
    expect(checkSummaries([run({ unhandledErrors: 1 })], allowed).ok).toBe(false);
    expect(checkSummaries([run({ passed: 0 })], allowed).ok).toBe(false);
  });
});

describe('the allow-list', () => {
  it('.ci/allowed-skips.json parses and every entry has a reason', () => {
    const path = join(REPO, '.ci', 'allowed-skips.json');
    const entries = parseAllowList(readFileSync(path, 'utf8'), path);
    for (const entry of entries) expect(entry.why.length, entry.name).toBeGreaterThan(20);
  });

  it('refuses an entry without a reason, naming the entry and key', () => {
    expect(() => parseAllowList('[{"file":"f","name":"n","why":""}]', 'allow.json')).toThrow('allow.json[0].why: a non-empty string is required, got ""');
    expect(() => parseAllowList('{}', 'allow.json')).toThrow(/expected a JSON array/);
  });
});

describe('skip or fail', () => {
  it('CI is on for CI=true or 1, off when unset, empty, 0 or false', () => {
    expect([{ CI: 'true' }, { CI: '1' }, { CI: 'TRUE' }].map((env) => inCi(env))).toEqual([true, true, true]);
    expect([{}, { CI: '' }, { CI: '0' }, { CI: 'false' }].map((env) => inCi(env))).toEqual([false, false, false, false]);
  });

  it('DFE_TEST_<TOOL>_BIN overrides the lookup; a missing path hides the tool', () => {
    expect(findTool('helm', { PATH: '', DFE_TEST_HELM_BIN: '/nonexistent/helm' })).toBeUndefined();
    expect(findTool('node', { PATH: '', DFE_TEST_NODE_BIN: process.execPath })).toBe(process.execPath);
    expect(findTool('definitely-not-a-tool', { PATH: '/usr/bin' })).toBeUndefined();
  });
});
