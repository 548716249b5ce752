import { openClickHouse } from '../clickhouse/client.js';
import { systemClock, type Clock } from '../clock.js';
import type { AppConfig } from '../config/load.js';
import type { ResolvedTopology } from '../coordination/tables.js';
import { coordinationSettings, resolveTopology } from '../coordination/topology.js';
import { loadHuntsDir } from '../schedule/hunt-files.js';
import { describeError } from '../errors.js';
import { backlogRefresh } from './backlog-check.js';
import { explain, type DoctorContext, type DoctorRole } from './context.js';
import type { CheckResult, DoctorReport } from './report.js';
import { claimMode, clockSkew, maxExecutionTime, serverVersion, spanLog } from './server-checks.js';
import { coordinationSchema, dueLatency, grants, outputDedup } from './table-checks.js';

/**
 * `dfe-hunt-runner doctor` (docs/operations.md#doctor): the checks an operator runs against
 * their own ClickHouse, in order, one after the other (the server-version line first, so a
 * server too old for the rest says so at the top). A check that throws is a failing line,
 * never a crash; the CLI prints the report and exits 1 when a line failed.
 */
export interface DoctorOptions {
  readonly role?: DoctorRole;
  readonly clock?: Clock;
}

function target(config: AppConfig): string {
  const ch = config.clickhouse;
  const where = ch.backend === 'server' ? (ch.url ?? 'server') : `embedded engine at ${ch.embeddedPath}`;
  return `${where}, user ${ch.username}, database ${ch.dataDatabase}`;
}

export async function runDoctor(config: AppConfig, options: DoctorOptions = {}): Promise<DoctorReport> {
  const report = (checks: CheckResult[]): DoctorReport => ({ target: target(config), checks });
  let handle;
  try {
    handle = await openClickHouse(config.clickhouse);
  } catch (err) {
    return report([{ name: 'connection', status: 'fail', detail: describeError(err), fix: 'check DFE_CLICKHOUSE_URL (or the embedded engine) and the credentials' }]);
  }
  try {
    const database = config.clickhouse.dataDatabase;
    const checks: CheckResult[] = [];
    let topology: ResolvedTopology | undefined;
    try {
      topology = await resolveTopology(handle.client, config.clickhouse);
      checks.push({ name: 'topology', status: 'ok', detail: `${topology.kind} (DFE_CLICKHOUSE_TOPOLOGY=${config.clickhouse.topology})` });
    } catch (err) {
      checks.push({ name: 'topology', status: 'fail', detail: explain(err), fix: 'set DFE_CLICKHOUSE_TOPOLOGY=single or replicated explicitly' });
    }
    let hunts: DoctorContext['hunts'];
    try {
      hunts = loadHuntsDir(config.runner.huntsDir, config.runner.spreadFraction).hunts;
    } catch (err) {
      hunts = { error: describeError(err) };
    }
    const ctx: DoctorContext = {
      client: handle.client,
      config,
      role: options.role ?? 'runner',
      clock: options.clock ?? systemClock,
      database,
      topology,
      settings: coordinationSettings(topology ?? { kind: 'single' }),
      hunts,
    };
    checks.unshift(await serverVersion(ctx));
    for (const check of [claimMode, grants, coordinationSchema, spanLog, clockSkew, dueLatency, backlogRefresh, maxExecutionTime]) checks.push(await check(ctx));
    checks.push(...(await outputDedup(ctx)));
    return report(checks);
  } finally {
    await handle.close();
  }
}
