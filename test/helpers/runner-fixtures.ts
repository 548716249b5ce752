import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type AppConfig } from '../../src/config/load.js';
import { embeddedPathForThisProcess, type TestDatabase } from './clickhouse.js';

/** Shared fixtures of the runner tests: hunt directories, an output table, config, a log catcher. */

export function tempHuntsDir(): { dir: string; write(id: string, yaml: string): void; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-hunts-'));
  return {
    dir,
    write: (id, yaml) => writeFileSync(join(dir, `${id}.yaml`), yaml),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Each test hunt INSERTs one row per run into `out`, a plain MergeTree: no
 * deduplication, so a double run shows as two rows.
 */
export async function createOutputTable(db: TestDatabase): Promise<void> {
  await db.handle.client.command({
    query: `CREATE TABLE IF NOT EXISTS \`${db.database}\`.out
      (hunt_id String, fire Int64, window_start Int64, window_end Int64, at DateTime64(3) DEFAULT now64(3))
      ENGINE = MergeTree ORDER BY (hunt_id, fire)`,
  });
}

/** A hunt whose run optionally sleeps (statement 0), then writes its output row (last statement). */
export function outputHunt(database: string, huntId: string, interval: string | number, options: { sleepSeconds?: number } = {}): string {
  const insert =
    `INSERT INTO \`${database}\`.out (hunt_id, fire, window_start, window_end) ` +
    `SELECT '${huntId}', {window_end:Int64}, {window_start:Int64}, {window_end:Int64}`;
  const queries: string[] = [];
  const settings: string[] = [];
  if (options.sleepSeconds !== undefined) {
    const steps = Math.max(1, Math.round(options.sleepSeconds / 0.5));
    queries.push(`SELECT sum(sleepEachRow(0.5)) FROM numbers(${steps})`);
    // A per-hunt setting: ClickHouse caps a block's sleep at 3 s unless told otherwise.
    settings.push('settings:', '  function_sleep_max_microseconds_per_block: 60000000', '  max_block_size: 1');
  }
  queries.push(insert);
  return [
    `schedule: {mode: rate, interval: ${JSON.stringify(interval)}}`,
    ...settings,
    'queries:',
    ...queries.map((q) => `  - ${JSON.stringify(q)}`),
    '',
  ].join('\n');
}

export function runnerConfig(db: TestDatabase, huntsDir: string, env: Record<string, string> = {}): AppConfig {
  return loadConfig({
    DFE_CLICKHOUSE_DATA_DATABASE: db.database,
    DFE_EMBEDDED_PATH: embeddedPathForThisProcess(),
    DFE_HUNTS_DIR: huntsDir,
    DFE_CLICKHOUSE_TOPOLOGY: 'single',
    LOG_LEVEL: 'silent',
    ...(process.env.DFE_CLICKHOUSE_URL ? { DFE_CLICKHOUSE_URL: process.env.DFE_CLICKHOUSE_URL } : {}),
    ...env,
  });
}

export interface OutputRow {
  hunt_id: string;
  fire: number;
  window_start: number;
  window_end: number;
}

export async function outputRows(db: TestDatabase): Promise<OutputRow[]> {
  const rs = await db.handle.client.query({
    query: `SELECT hunt_id, fire, window_start, window_end FROM \`${db.database}\`.out ORDER BY hunt_id, fire`,
    format: 'JSONEachRow',
  });
  return (await rs.json<Record<string, string | number>>()).map((r) => ({
    hunt_id: String(r.hunt_id),
    fire: Number(r.fire),
    window_start: Number(r.window_start),
    window_end: Number(r.window_end),
  }));
}
