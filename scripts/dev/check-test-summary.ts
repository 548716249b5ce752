/**
 * `node dist/scripts/dev/check-test-summary.js <summary dir> <allow-list>`: the last step of
 * .ci/run. Exits 1 when a test failed, a file failed to load, or a test was skipped that the
 * allow-list does not name; prints every skip with its reason either way.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { checkSummaries, parseAllowList, type TestSummary } from './test-summary.js';

function main(args: readonly string[]): number {
  const [dir, allowListPath] = args;
  if (!dir || !allowListPath) {
    console.error('usage: check-test-summary <summary dir> <allowed-skips.json>');
    return 2;
  }
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')).sort() : [];
  const summaries = files.map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as TestSummary);
  const allowed = parseAllowList(readFileSync(allowListPath, 'utf8'), allowListPath);
  const verdict = checkSummaries(summaries, allowed);
  for (const line of verdict.lines) console.log(`[skip check] ${line}`);
  console.log(`[skip check] ${verdict.ok ? 'ok' : 'FAILED'}`);
  return verdict.ok ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
