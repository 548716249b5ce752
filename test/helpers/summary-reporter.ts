import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { Reporter, TestCase, TestModule } from 'vitest/node';
import type { TestSummary } from '../../scripts/dev/test-summary.js';

/**
 * Prints one plain closing line, `tests: N passed, N failed, N skipped`, and, when
 * DFE_TEST_SUMMARY_DIR is set (.ci/run sets it), writes the same counts with every skipped
 * test and its reason as JSON, one file per vitest run, for scripts/dev/check-test-summary.ts.
 */
function skipReason(test: TestCase): string | undefined {
  const result = test.result();
  if (result.state === 'skipped' && result.note) return result.note;
  return test.meta().skipReason;
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const root = resolve(import.meta.dirname, '..', '..');
    const summary: TestSummary = { passed: 0, failed: 0, skipped: [], moduleErrors: [], unhandledErrors: unhandledErrors.length };
    for (const mod of testModules) {
      const file = relative(root, mod.moduleId);
      for (const error of mod.errors()) summary.moduleErrors.push({ file, message: error.message });
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') summary.passed += 1;
        else if (state === 'failed') summary.failed += 1;
        else summary.skipped.push({ file, name: test.fullName, reason: skipReason(test) ?? null });
      }
    }
    process.stdout.write(`\ntests: ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped.length} skipped\n`);
    const dir = process.env.DFE_TEST_SUMMARY_DIR;
    if (!dir) return;
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `vitest-${Date.now()}-${process.pid}.json`);
    writeFileSync(path, `${JSON.stringify(summary, null, 2)}\n`);
    process.stdout.write(`tests: summary written to ${path}\n`);
  }
}
