/**
 * scripts/keda-scale-test.sh needs a real cluster to run end to end; what can be checked
 * here is checked for real: its SQL runs on the ClickHouse engine and moves the very
 * queries the shim serves (the pressure rule, THE due-count SQL) the way the script relies
 * on; its throwaway manifests pass kubeconform -strict; it is shellcheck-clean; it refuses
 * bad settings before touching anything.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quoteDatabase } from '../../src/clickhouse/identifiers.js';
import { dueCountSql } from '../../src/coordination/due-sql.js';
import { applySchema } from '../../src/coordination/topology.js';
import { createOtelGaugeTable } from '../../src/pressure/otel-table.js';
import { pressureQueryParams, renderPressureSql } from '../../src/pressure/rule.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { REPO, kubeconform, missing, prepareSchemas, tools } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';

const SCRIPT = join(REPO, 'scripts', 'keda-scale-test.sh');

function script(args: string[], env: Record<string, string> = {}) {
  // A clean environment: nothing of the test runner's leaks into the script's defaults.
  const result = spawnSync('bash', [SCRIPT, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', RUN_ID: 't1', ...env } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('keda-scale-test.sh SQL on the real engine', () => {
  let db: TestDatabase;
  let sqlOf: (name: string) => string;

  beforeAll(async () => {
    db = await openTestDatabase('scale');
    await applySchema(db.handle.client, db.database, { kind: 'single' });
    await createOtelGaugeTable(db.handle.client, db.database);
    sqlOf = (name) => {
      const out = script(['--print-sql', name], { DATA_DATABASE: db.database });
      expect(out.status, out.stderr).toBe(0);
      return out.stdout;
    };
  });
  afterAll(async () => db?.close());

  const run = (name: string, params: Record<string, unknown>) => db.handle.client.command({ query: sqlOf(name), query_params: params });
  const pressure = async (service: string) =>
    (await queryRows<{ pressure: number }>(db, renderPressureSql(quoteDatabase(db.database)), pressureQueryParams(service)))[0]!.pressure;
  const backlog = async () => {
    const [row] = await queryRows<{ value: string | number }>(db, dueCountSql(db.database));
    const due = Number(row?.value);
    expect(Number.isInteger(due), `due count ${String(row?.value)}`).toBe(true);
    return due;
  };

  it('pressure-push writes a point the pressure rule reads for that service only', async () => {
    expect(await pressure('keda-scale-test-t1')).toBe(0);
    await run('pressure-push', { service: 'keda-scale-test-t1', pod: 'keda-scale-test-pod', value: 100 });
    await run('pressure-push', { service: 'keda-scale-test-t1', pod: 'keda-scale-test-pod', value: 100 });
    expect(await pressure('keda-scale-test-t1')).toBe(100);
    expect(await pressure('someone-else')).toBe(0);
    // Pushing low into the same series drags its window average down.
    await run('pressure-push', { service: 'keda-scale-test-t1', pod: 'keda-scale-test-pod', value: 0 });
    await run('pressure-push', { service: 'keda-scale-test-t1', pod: 'keda-scale-test-pod', value: 0 });
    await run('pressure-push', { service: 'keda-scale-test-t1', pod: 'keda-scale-test-pod', value: 0 });
    expect(await pressure('keda-scale-test-t1')).toBe(40);
  });

  it('backlog-push makes N hunts due by THE due SQL; backlog-clear tombstones them', async () => {
    const baseline = await backlog();
    await run('backlog-push', { prefix: 'keda-scale-test-t1', count: 5 });
    expect(await backlog()).toBe(baseline + 5);
    // Tombstones must be newer than the rows they replace (DateTime64(3) version column).
    await new Promise((resolve) => setTimeout(resolve, 20));
    await run('backlog-clear', { prefix: 'keda-scale-test-t1', count: 5 });
    expect(await backlog()).toBe(baseline);
  });
});

describe('keda-scale-test.sh as a program', () => {
  it('refuses to run without CLICKHOUSE_URL, naming it, before touching the cluster', () => {
    const out = script(['both']);
    expect(out.status).toBe(64);
    expect(out.stderr).toMatch(/CLICKHOUSE_URL is required/);
  });

  it('refuses a database name that is not an identifier, naming the variable and value', () => {
    const out = script(['--print-sql', 'backlog-push'], { DATA_DATABASE: 'dfe`; DROP TABLE x' });
    expect(out.status).not.toBe(0);
    expect(out.stderr).toMatch(/DATA_DATABASE must match .* \(got 'dfe`; DROP TABLE x'\)/);
  });

  needs(missing('kubeconform', 'openApiSpec', 'crdsDir')).it('renders throwaway manifests that kubeconform accepts', () => {
    const location = prepareSchemas();
    for (const path of ['pressure', 'backlog']) {
      const out = script(['--print-manifests', path], { SHIM_AUTH_REF: 'shim-auth', SHIM_AUTH_MODE: 'bearer' });
      expect(out.status, out.stderr).toBe(0);
      const result = kubeconform(location, out.stdout);
      expect(result.resources.map((r) => `${r.kind}:${r.status}`).sort(), result.raw).toEqual(['Deployment:statusValid', 'ScaledObject:statusValid']);
    }
    const pressure = script(['--print-manifests', 'pressure']).stdout;
    expect(pressure).toContain('metricType: Value');
    expect(pressure).toContain('/keda/pressure?service=keda-scale-test-t1&hold=50');
    expect(script(['--print-manifests', 'backlog']).stdout).toContain('metricType: AverageValue');
  });

  needs(missing('shellcheck')).it('every shell script is shellcheck-clean', () => {
    const scripts = [
      ...readdirSync(join(REPO, 'scripts')).filter((f) => f.endsWith('.sh')).map((f) => join(REPO, 'scripts', f)),
      ...readdirSync(join(REPO, 'scripts', 'image')).map((f) => join(REPO, 'scripts', 'image', f)),
      ...readdirSync(join(REPO, '.ci')).filter((f) => f.endsWith('.sh')).map((f) => join(REPO, '.ci', f)),
      join(REPO, '.ci', 'run'),
    ];
    expect(scripts).toContain(SCRIPT);
    const result = spawnSync(tools.shellcheck!, scripts, { encoding: 'utf8' });
    expect(result.status, result.stdout + result.stderr).toBe(0);
  });
});
