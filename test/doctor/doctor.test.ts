import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/hunt-runner.js';
import { loadConfig, type AppConfig } from '../../src/config/load.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import type { CheckResult, DoctorReport } from '../../src/doctor/report.js';
import { applySchemaNow, materialiseHunts } from '../../src/runner/operations.js';
import { capturingLogger } from '../helpers/logger.js';
import { keeperEnv, openKeeperDatabase } from '../helpers/keeper.js';
import type { TestDatabase } from '../helpers/clickhouse.js';
import { tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * `dfe-hunt-runner doctor` on the embedded engine with the shipped Keeper config
 * (examples/embedded-keeper.xml), so KeeperMap works and `auto` picks keeper.
 */
let db: TestDatabase;
const hunts = tempHuntsDir();
let env: Record<string, string>;
let config: AppConfig;

const byName = (report: DoctorReport): Map<string, CheckResult> => new Map(report.checks.map((c) => [c.name, c]));

async function cli(...args: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const code = await main(['doctor', ...args]);
    return { code: typeof code === 'number' ? code : -1, stdout };
  } finally {
    process.env = saved;
    write.mockRestore();
    stderr.mockRestore();
  }
}

beforeAll(async () => {
  db = await openKeeperDatabase('doctor');
  env = { ...keeperEnv(db.database), DFE_HUNTS_DIR: hunts.dir };
  config = loadConfig(env);
  await db.handle.client.command({
    query: `CREATE TABLE \`${db.database}\`.found (x UInt8) ENGINE = MergeTree ORDER BY x SETTINGS non_replicated_deduplication_window = 100`,
  });
  await db.handle.client.command({ query: `CREATE TABLE \`${db.database}\`.scratch (x UInt8) ENGINE = Memory` });
  hunts.write('finds', `schedule: {mode: rate, interval: 60}\nqueries: ["INSERT INTO ${db.database}.found SELECT 1"]\n`);
}, 60_000);

afterAll(async () => {
  await db?.close();
  hunts.remove();
});

describe('dfe-hunt-runner doctor on the embedded engine', () => {
  it('before schema --apply: the schema and due-query lines fail with the fix, and the command exits 1', async () => {
    const report = await runDoctor(config);
    const checks = byName(report);
    expect(checks.get('server version')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^ClickHouse \d+\./) });
    expect(checks.get('coordination schema')).toMatchObject({ status: 'fail', fix: expect.stringContaining('schema --apply') });
    expect(checks.get('coordination schema')?.detail).toContain('hunt_schedule missing');
    expect(checks.get('max_execution_time')).toMatchObject({ status: 'ok', detail: 'a 3 s query was cut at max_execution_time = 1' });
    expect(checks.get('grants')?.status).toBe('ok');
    expect(checks.get('span log')?.status).toMatch(/^(ok|warn)$/);
    const run = await cli('--json');
    expect(run.code).toBe(1);
    const json = JSON.parse(run.stdout) as { ok: boolean; checks: CheckResult[] };
    expect(json.ok).toBe(false);
    expect(json.checks.find((c) => c.name === 'coordination schema')?.status).toBe('fail');
  }, 60_000);

  it('after schema --apply and materialise: no failing line, auto picks keeper, and exit 0', async () => {
    await applySchemaNow(config);
    await materialiseHunts(config, capturingLogger().logger);
    const checks = byName(await runDoctor(config));
    expect(checks.get('keeper / claim mode')).toMatchObject({ status: 'ok', detail: 'auto follows the recorded keeper' });
    expect(checks.get('coordination schema')).toMatchObject({ status: 'ok', detail: `7 tables in ${db.database}, every column present` });
    expect(checks.get('due query')?.detail).toMatch(/^\d+ ms at 1 scheduled hunt\(s\), [01] due now$/);
    expect(checks.get('output dedup')).toMatchObject({ status: 'ok', detail: '1 output table(s) of 1 hunt(s) deduplicate repeated inserts' });
    expect(checks.get('clock skew')?.status).toBe('ok');
    expect([...checks.values()].filter((c) => c.status === 'fail')).toEqual([]);
    const run = await cli();
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^keeper \/ claim mode +ok +auto follows the recorded keeper$/m);
  }, 60_000);

  it('a hunt writing to a table that does not deduplicate fails its own line, naming hunt, table and fix', async () => {
    hunts.write('scratches', `schedule: {mode: rate, interval: 60}\nqueries: ["INSERT INTO ${db.database}.scratch SELECT 1"]\n`);
    try {
      const line = byName(await runDoctor(config)).get('output dedup scratches');
      expect(line).toEqual({
        name: 'output dedup scratches',
        status: 'fail',
        detail: `hunt scratches writes ${db.database}.scratch: Memory never deduplicates inserts; a window run twice would write its rows twice`,
        fix: `write to a Replicated*MergeTree table, or a MergeTree with SETTINGS non_replicated_deduplication_window = 1000, instead of Memory`,
      });
    } finally {
      rmSync(join(hunts.dir, 'scratches.yaml'));
    }
  }, 60_000);

  it('--as shim: the recorded mode only (no probe), and the grants checked against the shim\'s list', async () => {
    const checks = byName(await runDoctor(config, { role: 'shim' }));
    expect(checks.get('keeper / claim mode')?.detail).toBe("keeper (recorded in hunt_coordination; not probed: the shim's user is read-only)");
    expect(checks.get('grants')?.detail).toMatch(/^user default as the shim's: all 6 needed privilege\(s\) granted$/);
    // Where no hunts are mounted (the shim's pod), the output line warns instead of failing.
    const shimPod = byName(await runDoctor(loadConfig({ ...env, DFE_HUNTS_DIR: join(hunts.dir, 'absent') }), { role: 'shim' }));
    expect(shimPod.get('output dedup')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/^hunts not read: /) });
    expect((await cli('--as', 'nobody')).code).toBe(2);
  }, 60_000);
});
