import { afterAll, beforeAll, expect } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import type { CheckResult } from '../../src/doctor/report.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { needs } from '../helpers/requirement.js';
import { tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * `doctor` against Debian's clickhouse-server 18.16 (.ci/install-clickhouse-server.sh): a real
 * server far older than the runner needs. Every check must end as a named line, the version
 * line failing with its reason, and nothing may crash.
 */
const found = clickHouseServerAvailability();
const gate = needs(found.kind === 'missing' ? found.reason : undefined);
let server: ClickHouseServerProcess;
const hunts = tempHuntsDir();

gate.describe('doctor on ClickHouse 18.16', () => {
  beforeAll(async () => {
    server = await startClickHouseServer();
    hunts.write('h1', 'schedule: {mode: rate, interval: 60}\nqueries: ["INSERT INTO dfe.detections SELECT 1"]\n');
  }, 60_000);
  afterAll(async () => {
    await server?.dispose();
    hunts.remove();
  });

  gate.it(
    'fails the old-version checks by name and reason, without crashing',
    async () => {
      const config = loadConfig({
        DFE_CLICKHOUSE_URL: server.url,
        DFE_CLICKHOUSE_BACKEND: 'server',
        DFE_CLICKHOUSE_DATA_DATABASE: 'dfe',
        DFE_CLICKHOUSE_TOPOLOGY: 'auto',
        DFE_HUNTS_DIR: hunts.dir,
        LOG_LEVEL: 'silent',
      });
      const report = await runDoctor(config);
      const byName = new Map<string, CheckResult>(report.checks.map((c) => [c.name, c]));
      const version = byName.get('server version');
      expect(version?.status).toBe('fail');
      expect(version?.detail).toMatch(/^ClickHouse 18\.16\.\S+ is older than 23\.8/);
      expect(version?.fix).toBe('upgrade ClickHouse to 23.8 or later');
      // The checks that need newer SQL say what the server lacks; each failing line names a fix.
      expect(byName.get('coordination schema')?.detail).toMatch(/does not know query parameters/);
      expect(byName.get('output dedup')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/does not know query parameters/) });
      expect(byName.get('grants')?.detail).toMatch(/^cannot read the grants of user default: .*Unknown function currentUser/);
      expect(byName.get('max_execution_time')?.status).toBe('ok');
      for (const check of report.checks) {
        expect(['ok', 'warn', 'fail']).toContain(check.status);
        if (check.status !== 'ok') expect(check.fix, `${check.name} names a fix`).toBeTruthy();
      }
    },
    60_000,
  );
});
