import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKLOG_FRESH_REFRESHES } from '../../src/coordination/backlog-refresh.js';
import { DEFAULT_SCHEMA_OPTIONS } from '../../src/coordination/tables.js';
import { applySchema } from '../../src/coordination/topology.js';
import { loadConfig, type AppConfig } from '../../src/config/load.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import type { CheckResult } from '../../src/doctor/report.js';
import { embeddedPathForThisProcess, openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * The doctor's `backlog refresh` line (docs/operations.md#doctor) on the real engine: the
 * server-refreshed count (docs/tables.md#the-server-refreshed-count) reported healthy while
 * the view appends, and as the shim's fallback to the exact due query when there is no view
 * or its newest count is too old; a view left over under a setting of 0 warns.
 */
const SINGLE = { kind: 'single' } as const;
const hunts = tempHuntsDir();

function doctorConfig(db: TestDatabase, refreshSeconds: number): AppConfig {
  return loadConfig({
    ...process.env,
    DFE_CLICKHOUSE_DATA_DATABASE: db.database,
    DFE_EMBEDDED_PATH: embeddedPathForThisProcess(),
    DFE_CLICKHOUSE_TOPOLOGY: 'single',
    DFE_HUNTS_DIR: hunts.dir,
    DFE_BACKLOG_REFRESH_SECONDS: String(refreshSeconds),
    LOG_LEVEL: 'silent',
  });
}

async function backlogLine(db: TestDatabase, refreshSeconds: number): Promise<CheckResult | undefined> {
  const report = await runDoctor(doctorConfig(db, refreshSeconds));
  return report.checks.find((c) => c.name === 'backlog refresh');
}

/** Waits (bounded, no timing asserted) until the view has appended a count. */
async function firstRefresh(db: TestDatabase): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const [row] = await queryRows<{ n: number | string }>(db, `SELECT count() AS n FROM \`${db.database}\`.hunt_backlog`);
    if (Number(row?.n) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the refreshable view appended nothing in 30 s');
}

afterAll(() => hunts.remove());

describe("doctor's backlog refresh line, with the view", () => {
  // 5 s, not 1: the healthy line must not turn stale (3 periods) on a loaded machine.
  const PERIOD = 5;
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('doctor_refresh');
    await applySchema(db.handle.client, db.database, SINGLE, { ...DEFAULT_SCHEMA_OPTIONS, backlogRefreshSeconds: PERIOD });
    await firstRefresh(db);
  }, 60_000);
  afterAll(async () => db?.close());

  it('a view that refreshes: ok, with its state and the newest count', async () => {
    const line = await backlogLine(db, PERIOD);
    expect(line).toMatchObject({ status: 'ok' });
    expect(line?.detail).toMatch(/^every 5 s \(view \w+, last success \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\); the newest count \(0, at .+\) is \d+\.\d s old$/);
  }, 60_000);

  it('the setting at 0 while the view exists: a warning that the schema step has not run since', async () => {
    const line = await backlogLine(db, 0);
    expect(line).toMatchObject({ status: 'warn', fix: expect.stringContaining('schema --apply') });
    expect(line?.detail).toBe(
      `DFE_BACKLOG_REFRESH_SECONDS=0, but ${db.database}.hunt_backlog_refresh exists: the schema step has not run since the setting was turned off (it drops the view), so the server still runs the due count every refresh for nothing`,
    );
  }, 60_000);

  it('a stopped view whose newest count is older than its refreshes allow: the fallback', async () => {
    const c = db.handle.client;
    await c.command({ query: `SYSTEM STOP VIEW \`${db.database}\`.hunt_backlog_refresh` });
    await c.command({ query: `TRUNCATE TABLE \`${db.database}\`.hunt_backlog` });
    const old = BACKLOG_FRESH_REFRESHES * PERIOD + 60;
    await c.command({ query: `INSERT INTO \`${db.database}\`.hunt_backlog VALUES (now64(3) - INTERVAL ${old} SECOND, 7)` });
    const line = await backlogLine(db, PERIOD);
    expect(line).toMatchObject({ status: 'warn', fix: expect.stringContaining('SYSTEM START VIEW') });
    expect(line?.detail).toMatch(/^DFE_BACKLOG_REFRESH_SECONDS=5 \(view \w+, last success [^)]+\): /);
    expect(line?.detail).toContain('the newest count (7, at ');
    expect(line?.detail).toContain(
      `old, older than ${BACKLOG_FRESH_REFRESHES} refreshes (${(BACKLOG_FRESH_REFRESHES * PERIOD).toFixed(1)} s), so the shim falls back to the exact due query on every poll (slower, never wrong)`,
    );
  }, 60_000);
});

describe("doctor's backlog refresh line, without the view", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('doctor_norefresh');
    await applySchema(db.handle.client, db.database, SINGLE, { ...DEFAULT_SCHEMA_OPTIONS, backlogRefreshSeconds: 0 });
  }, 60_000);
  afterAll(async () => db?.close());

  it('the setting at 0 and no view: ok, the due query itself', async () => {
    expect(await backlogLine(db, 0)).toEqual({ name: 'backlog refresh', status: 'ok', detail: "off (DFE_BACKLOG_REFRESH_SECONDS=0): the shim's backlog is the exact due query" });
  }, 60_000);

  it('the setting above 0 but no view: the fallback, and the fix is the schema step with the setting', async () => {
    const line = await backlogLine(db, 10);
    expect(line).toMatchObject({ status: 'warn', fix: expect.stringContaining('with DFE_BACKLOG_REFRESH_SECONDS=10') });
    expect(line?.detail).toBe(
      `DFE_BACKLOG_REFRESH_SECONDS=10, but there is no view ${db.database}.hunt_backlog_refresh: nothing refreshes the count, so the shim falls back to the exact due query on every poll (slower, never wrong)`,
    );
  }, 60_000);
});

describe("doctor's backlog refresh line, with a view whose refresh fails", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('doctor_refresh_fails');
    await applySchema(db.handle.client, db.database, SINGLE, { ...DEFAULT_SCHEMA_OPTIONS, backlogRefreshSeconds: 1 });
    await firstRefresh(db);
    // The due count reads hunt_lease: without it every refresh fails.
    await db.handle.client.command({ query: `DROP TABLE \`${db.database}\`.hunt_lease` });
    for (let i = 0; i < 300; i++) {
      const [row] = await queryRows<{ exception: string }>(
        db,
        'SELECT exception FROM system.view_refreshes WHERE database = {db:String} AND view = {view:String}',
        { db: db.database, view: 'hunt_backlog_refresh' },
      );
      if (row && row.exception !== '') return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the refresh did not fail in 30 s');
  }, 60_000);
  afterAll(async () => db?.close());

  it("warns with the view's exception and names the user the view runs as", async () => {
    const line = await backlogLine(db, 1);
    expect(line).toMatchObject({ status: 'warn', fix: expect.stringMatching(/^fix what the exception names \(the view runs as the runner's user/) });
    expect(line?.detail).toMatch(/^DFE_BACKLOG_REFRESH_SECONDS=1 \(view \w+, last success [^)]+\): its last refresh failed: .*hunt_lease/s);
  }, 60_000);
});
