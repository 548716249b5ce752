import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openClickHouse } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { describeError } from '../src/errors.js';
import { benchDueQuery } from './due-query.js';
import { formatLine, summary, type BenchLine } from './report.js';

/**
 * `npm run bench`: every figure on loopback, bounded in count and time, each
 * printed with its same-run baseline and goal, then a summary; the figures are
 * written to docs/performance.md.
 */
type Section = { readonly name: string; readonly run: () => Promise<BenchLine[]> };

async function main(): Promise<void> {
  const embeddedPath = mkdtempSync(join(tmpdir(), 'dfe-bench-ch-'));
  const config = loadConfig({ DFE_EMBEDDED_PATH: embeddedPath, DFE_CLICKHOUSE_BACKEND: 'embedded' }).clickhouse;
  const embedded = await openClickHouse(config);
  const sections: Section[] = [{ name: 'due query', run: () => benchDueQuery(embedded.client) }];
  const lines: BenchLine[] = [];
  try {
    for (const section of sections) {
      try {
        for (const line of await section.run()) {
          lines.push(line);
          console.log(formatLine(line));
        }
      } catch (err) {
        const line: BenchLine = { kind: 'skipped', name: section.name, reason: `failed: ${describeError(err)}` };
        lines.push(line);
        console.log(formatLine(line));
      }
    }
  } finally {
    await embedded.close();
    rmSync(embeddedPath, { recursive: true, force: true });
  }
  console.log(summary(lines));
}

await main();
