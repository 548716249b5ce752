import { describe, expect, it } from 'vitest';
import { describeNeeds, missingGrants, parseGrant } from '../../../src/doctor/grants.js';
import { expectedColumns, grantNeeds } from '../../../src/doctor/needs.js';
import { doctorJson, formatDoctor, type DoctorReport } from '../../../src/doctor/report.js';
import { versionAtLeast } from '../../../src/doctor/server-checks.js';
import { compileHuntFile } from '../../../src/schedule/hunt-spec.js';

const runnerNeeds = (hunts = [] as Parameters<typeof grantNeeds>[0]['hunts'], backlogRefreshSeconds = 0) =>
  grantNeeds({ role: 'runner', database: 'dfe', otelDatabase: 'otel', hunts, currentDatabase: 'default', backlogRefreshSeconds });
const shimNeeds = (backlogRefreshSeconds = 0) =>
  grantNeeds({ role: 'shim', database: 'dfe', otelDatabase: 'otel', hunts: [], currentDatabase: 'default', backlogRefreshSeconds });

describe("the doctor's grants check (pure)", () => {
  it('reads the forms SHOW GRANTS prints', () => {
    expect(parseGrant('GRANT SELECT, INSERT ON dfe.hunt_run TO dfe_hunt_runner_writer')).toEqual({
      revoke: false,
      privileges: ['SELECT', 'INSERT'],
      database: 'dfe',
      table: 'hunt_run',
    });
    expect(parseGrant('GRANT SELECT(a, b) ON `my-db`.* TO u')?.privileges).toEqual(['SELECT(A, B)']);
    expect(parseGrant('GRANT dfe_hunt_runner_writer TO dfe_hunt_runner')).toBeUndefined();
  });

  it('the grants docs/clickhouse-users.md gives the runner cover its needs; one missing table is named', () => {
    const doc = [
      'GRANT CREATE DATABASE, CREATE TABLE ON dfe.* TO dfe_hunt_runner',
      ...['hunt_schedule', 'hunt_lease', 'hunt_watermark', 'hunt_state', 'hunt_run', 'hunt_runner_heartbeat', 'hunt_coordination'].map(
        (t) => `GRANT SELECT, INSERT ON dfe.${t} TO dfe_hunt_runner`,
      ),
      'GRANT INSERT ON dfe.detections TO dfe_hunt_runner',
    ];
    const hunt = compileHuntFile('h.yaml', 'schedule: {mode: rate, interval: 60}\nqueries: ["INSERT INTO dfe.detections SELECT 1"]\n', 0.5);
    if (hunt.kind !== 'hunt') throw new Error('fixture');
    expect(missingGrants(doc, runnerNeeds([hunt.spec]))).toEqual([]);
    const missing = missingGrants(doc.filter((l) => !l.includes('hunt_coordination')), runnerNeeds([hunt.spec]));
    expect(describeNeeds(missing)).toEqual(['SELECT, INSERT ON dfe.hunt_coordination']);
  });

  it('ALL or a database wildcard covers; a partial revoke or a column grant does not', () => {
    expect(missingGrants(['GRANT ALL ON *.* TO default WITH GRANT OPTION'], runnerNeeds())).toEqual([]);
    expect(missingGrants(['GRANT CREATE, SELECT, INSERT ON dfe.* TO u'], runnerNeeds())).toEqual([]);
    const revoked = missingGrants(['GRANT SELECT, INSERT, CREATE TABLE ON dfe.* TO u', 'REVOKE INSERT ON dfe.hunt_run FROM u'], runnerNeeds());
    expect(describeNeeds(revoked)).toEqual(['INSERT ON dfe.hunt_run']);
    expect(describeNeeds(missingGrants(['GRANT SELECT(hunt_id) ON dfe.* TO s', 'GRANT SELECT ON otel.* TO s'], shimNeeds()))).toEqual([
      'SELECT ON dfe.hunt_schedule',
      'SELECT ON dfe.hunt_watermark',
      'SELECT ON dfe.hunt_lease',
      'SELECT ON dfe.hunt_run',
      'SELECT ON dfe.hunt_state',
    ]);
  });

  it('with DFE_BACKLOG_REFRESH_SECONDS > 0: the shim reads hunt_backlog; the runner writes it and creates and drops the view', () => {
    const shimDoc = ['hunt_schedule', 'hunt_watermark', 'hunt_lease', 'hunt_run', 'hunt_state'].map((t) => `GRANT SELECT ON dfe.${t} TO s`);
    const shimGrants = [...shimDoc, 'GRANT SELECT ON otel.otel_metrics_gauge TO s'];
    expect(missingGrants(shimGrants, shimNeeds(0))).toEqual([]);
    expect(describeNeeds(missingGrants(shimGrants, shimNeeds(30)))).toEqual(['SELECT ON dfe.hunt_backlog']);
    expect(missingGrants([...shimGrants, 'GRANT SELECT ON dfe.hunt_backlog TO s'], shimNeeds(30))).toEqual([]);

    const runnerDoc = [
      'GRANT CREATE DATABASE, CREATE TABLE ON dfe.* TO r',
      ...['hunt_schedule', 'hunt_lease', 'hunt_watermark', 'hunt_state', 'hunt_run', 'hunt_runner_heartbeat', 'hunt_coordination'].map(
        (t) => `GRANT SELECT, INSERT ON dfe.${t} TO r`,
      ),
    ];
    expect(missingGrants(runnerDoc, runnerNeeds([], 0))).toEqual([]);
    expect(describeNeeds(missingGrants(runnerDoc, runnerNeeds([], 30)))).toEqual(['CREATE VIEW, DROP VIEW ON dfe.*', 'SELECT, INSERT ON dfe.hunt_backlog']);
    const withRefresh = [...runnerDoc, 'GRANT CREATE VIEW, DROP VIEW ON dfe.* TO r', 'GRANT SELECT, INSERT ON dfe.hunt_backlog TO r'];
    expect(missingGrants(withRefresh, runnerNeeds([], 30))).toEqual([]);
    // CREATE and DROP include their VIEW parts (ClickHouse's hierarchy); CREATE TABLE does not include CREATE VIEW.
    expect(missingGrants(['GRANT CREATE, DROP, SELECT, INSERT ON dfe.* TO r'], runnerNeeds([], 30))).toEqual([]);
    expect(describeNeeds(missingGrants(['GRANT CREATE TABLE, DROP TABLE, SELECT, INSERT ON dfe.* TO r'], runnerNeeds([], 30)))).toEqual([
      'CREATE VIEW, DROP VIEW ON dfe.*',
    ]);
  });

  it('expects the columns schema --apply creates, added ones included', () => {
    const columns = expectedColumns();
    expect(columns.get('hunt_schedule')).toEqual(['hunt_id', 'interval_seconds', 'phase_offset', 'enabled', 'updated', 'offset_source', 'moved_at']);
    expect(columns.get('hunt_run')).toContain('skipped_to');
  });

  it('compares versions by major and minor', () => {
    expect(versionAtLeast('18.16.1', [23, 8])).toBe(false);
    expect(versionAtLeast('23.8.2.7', [23, 8])).toBe(true);
    expect(versionAtLeast('26.7.2.1', [23, 8])).toBe(true);
    expect(versionAtLeast('23.7.9', [23, 8])).toBe(false);
  });
});

describe("the doctor's report (pure)", () => {
  const report: DoctorReport = {
    target: 'http://ch:8123, user u, database dfe',
    checks: [
      { name: 'server version', status: 'ok', detail: 'ClickHouse 25.8.1' },
      { name: 'span log', status: 'warn', detail: 'absent', fix: 'enable it' },
      { name: 'grants', status: 'fail', detail: 'lacks SELECT ON dfe.hunt_run', fix: 'GRANT SELECT ON dfe.hunt_run TO u' },
    ],
  };
  it('prints one line per check, the fix under each that is not ok, and names the failures', () => {
    const text = formatDoctor(report);
    expect(text.split('\n')).toEqual([
      'doctor: http://ch:8123, user u, database dfe',
      'check           status  detail',
      'server version  ok      ClickHouse 25.8.1',
      'span log        warn    absent',
      '                        fix: enable it',
      'grants          fail    lacks SELECT ON dfe.hunt_run',
      '                        fix: GRANT SELECT ON dfe.hunt_run TO u',
      '1 of 3 check(s) failed: grants',
      '',
    ]);
    expect(JSON.parse(doctorJson(report))).toMatchObject({ ok: false, checks: report.checks });
  });
});
