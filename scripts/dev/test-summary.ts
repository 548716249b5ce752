/**
 * The skip check that ends `.ci/run`: every vitest run of `npm test` writes a summary
 * (test/helpers/summary-reporter.ts); the runs together may skip nothing but the entries of
 * .ci/allowed-skips.json, each with a written reason. Pure: the CLI is check-test-summary.ts.
 */
export interface SkippedTest {
  readonly file: string;
  readonly name: string;
  /** The reason the test gave (`needs(…)` or `ctx.skip(note)`), or null when it gave none. */
  readonly reason: string | null;
}

export interface TestSummary {
  passed: number;
  failed: number;
  skipped: SkippedTest[];
  moduleErrors: { file: string; message: string }[];
  unhandledErrors: number;
}

/** One allowed skip: the test's file and full name, and why CI may skip it. */
export interface AllowedSkip {
  readonly file: string;
  readonly name: string;
  readonly why: string;
}

export interface Verdict {
  readonly ok: boolean;
  readonly lines: readonly string[];
}

export function parseAllowList(text: string, source: string): AllowedSkip[] {
  const parsed: unknown = JSON.parse(text);
  if (!Array.isArray(parsed)) throw new Error(`${source}: expected a JSON array of {file, name, why}`);
  return parsed.map((entry: unknown, i) => {
    const e = entry as Partial<Record<keyof AllowedSkip, unknown>>;
    for (const key of ['file', 'name', 'why'] as const) {
      if (typeof e?.[key] !== 'string' || (e[key] as string).trim() === '') throw new Error(`${source}[${i}].${key}: a non-empty string is required, got ${JSON.stringify(e?.[key])}`);
    }
    return { file: e.file as string, name: e.name as string, why: e.why as string };
  });
}

export function checkSummaries(summaries: readonly TestSummary[], allowed: readonly AllowedSkip[]): Verdict {
  const lines: string[] = [];
  if (summaries.length === 0) return { ok: false, lines: ['no test summary found: did the vitest runs use test/helpers/summary-reporter.ts?'] };
  let ok = true;
  const total = summaries.reduce((n, s) => ({ passed: n.passed + s.passed, failed: n.failed + s.failed }), { passed: 0, failed: 0 });
  const skipped = summaries.flatMap((s) => s.skipped);
  lines.push(`${summaries.length} vitest run(s): ${total.passed} passed, ${total.failed} failed, ${skipped.length} skipped`);
  if (total.failed > 0) ok = false;
  for (const s of summaries) {
    for (const e of s.moduleErrors) {
      ok = false;
      lines.push(`FILE ERROR ${e.file}: ${e.message}`);
    }
    if (s.unhandledErrors > 0) {
      ok = false;
      lines.push(`${s.unhandledErrors} unhandled error(s)`);
    }
  }
  for (const test of skipped) {
    const entry = allowed.find((a) => a.file === test.file && a.name === test.name);
    if (entry) lines.push(`allowed skip: ${test.file} > ${test.name} — ${entry.why} (the test said: ${test.reason ?? 'no reason'})`);
    else {
      ok = false;
      lines.push(`SKIPPED, not on .ci/allowed-skips.json: ${test.file} > ${test.name} — ${test.reason ?? 'no reason given'}`);
    }
  }
  if (total.passed === 0) {
    ok = false;
    lines.push('no test passed');
  }
  return { ok, lines };
}
