import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backlogCountSql, backlogSchemaSteps, backlogViewComment, BACKLOG_FRESH_REFRESHES } from '../../src/coordination/backlog-refresh.js';
import { dueCountSql } from '../../src/coordination/due-sql.js';
import { materialise } from '../../src/coordination/materialise.js';
import { applySchema, coordinationSettings } from '../../src/coordination/topology.js';
import { DEFAULT_SCHEMA_OPTIONS } from '../../src/coordination/tables.js';
import { compileHuntFile, type HuntSpec } from '../../src/schedule/hunt-spec.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * The server-refreshed count (docs/tables.md#the-server-refreshed-count) on the real engine:
 * the server's refreshable view appends THE due count, the shim's backlog reads the newest
 * count while it is fresh and asks the due count itself otherwise, and the schema step keeps,
 * replaces or drops the view as the setting says.
 */
const SINGLE = { kind: 'single' } as const;
const SETTINGS = coordinationSettings(SINGLE);
const withRefresh = (backlogRefreshSeconds: number) => ({ ...DEFAULT_SCHEMA_OPTIONS, backlogRefreshSeconds });

function spec(id: string, interval: number): HuntSpec {
  const result = compileHuntFile(`/h/${id}.yaml`, `schedule: {mode: rate, interval: ${interval}}\nqueries: [SELECT 1]\n`, 0.8);
  if (result.kind !== 'hunt') throw new Error('fixture');
  return result.spec;
}

/** Three hunts that never ran (due) and one whose watermark is in the future (not due). */
async function seedFleet(db: TestDatabase): Promise<void> {
  await materialise(db.handle.client, db.database, [spec('a', 60), spec('b', 300), spec('c', 3600), spec('d', 60)], SETTINGS);
  await db.handle.client.command({
    query: `INSERT INTO \`${db.database}\`.hunt_watermark (hunt_id, watermark) VALUES ('d', toInt64(toUnixTimestamp(now())) + 86400)`,
  });
}

async function shimBacklog(db: TestDatabase, refreshSeconds: number): Promise<number> {
  const rows = await queryRows<{ value: number | string }>(db, backlogCountSql(db.database, refreshSeconds));
  expect(rows).toHaveLength(1);
  return Number(rows[0]?.value);
}

async function view(db: TestDatabase): Promise<{ uuid: string; comment: string; create_table_query: string } | undefined> {
  const [row] = await queryRows<{ uuid: string; comment: string; create_table_query: string }>(
    db,
    `SELECT toString(uuid) AS uuid, comment, create_table_query FROM system.tables WHERE database = {db:String} AND name = 'hunt_backlog_refresh'`,
    { db: db.database },
  );
  return row;
}

/** Waits (bounded, no timing asserted) until the view has appended a count. */
async function firstRefresh(db: TestDatabase): Promise<{ at: number; value: number }> {
  for (let i = 0; i < 300; i++) {
    const [row] = await queryRows<{ at: number | string; value: number | string }>(
      db,
      `SELECT toUnixTimestamp(computed_at) AS at, value FROM \`${db.database}\`.hunt_backlog ORDER BY computed_at DESC LIMIT 1`,
    );
    if (row) return { at: Number(row.at), value: Number(row.value) };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the refreshable view appended nothing in 30 s');
}

describe('the server-refreshed count', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('backlog_refresh');
    await applySchema(db.handle.client, db.database, SINGLE, withRefresh(1));
    await seedFleet(db);
  });
  afterAll(async () => db?.close());

  it('the server appends THE due count, at the clock reading it was taken at', async () => {
    await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.hunt_backlog` });
    const refreshed = await firstRefresh(db);
    const [exact] = await queryRows<{ value: number | string }>(db, dueCountSql(db.database, { now: 'param' }), { now: refreshed.at });
    expect(refreshed.value).toBe(Number(exact?.value));
    expect(refreshed.value).toBe(3);
  });

  it('the shim reads that count while it is fresh', async () => {
    await firstRefresh(db);
    expect(await shimBacklog(db, 1)).toBe(3);
  });
});

describe("the shim's backlog with the refresh on", () => {
  let db: TestDatabase;
  const table = () => `\`${db.database}\`.hunt_backlog`;
  beforeAll(async () => {
    // The table without the view: what the shim reads is written by hand here.
    db = await openTestDatabase('backlog_read');
    await applySchema(db.handle.client, db.database, SINGLE);
    await seedFleet(db);
  });
  afterAll(async () => db?.close());

  it('with no count yet, asks the due count itself', async () => {
    await db.handle.client.command({ query: `TRUNCATE TABLE ${table()}` });
    expect(await shimBacklog(db, 10)).toBe(3);
  });

  it('answers the newest count while it is younger than its refreshes allow', async () => {
    await db.handle.client.command({ query: `TRUNCATE TABLE ${table()}` });
    await db.handle.client.command({
      query: `INSERT INTO ${table()} VALUES (now64(3) - INTERVAL 5 SECOND, 777), (now64(3) - INTERVAL 9 SECOND, 555)`,
    });
    expect(await shimBacklog(db, 10)).toBe(777);
  });

  it('a count of 0 that is fresh is a 0', async () => {
    await db.handle.client.command({ query: `TRUNCATE TABLE ${table()}` });
    await db.handle.client.command({ query: `INSERT INTO ${table()} VALUES (now64(3), 0)` });
    expect(await shimBacklog(db, 10)).toBe(0);
  });

  it('a count older than its refreshes allow is not used: the due count answers', async () => {
    await db.handle.client.command({ query: `TRUNCATE TABLE ${table()}` });
    const tooOld = 10 * BACKLOG_FRESH_REFRESHES + 5;
    await db.handle.client.command({ query: `INSERT INTO ${table()} VALUES (now64(3) - INTERVAL ${tooOld} SECOND, 777)` });
    expect(await shimBacklog(db, 10)).toBe(3);
    // The same row is fresh for a longer period.
    expect(await shimBacklog(db, 60)).toBe(777);
  });

  it('with the refresh off, the backlog is the due count, whatever the table holds', async () => {
    await db.handle.client.command({ query: `INSERT INTO ${table()} VALUES (now64(3), 777)` });
    expect(backlogCountSql(db.database, 0)).toBe(dueCountSql(db.database));
    expect(await shimBacklog(db, 0)).toBe(3);
  });
});

describe('the schema step keeps, replaces or drops the view', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('backlog_schema');
  });
  afterAll(async () => db?.close());

  it('applied again with the same period, the view is kept; a new period replaces it; 0 drops it and keeps the table', async () => {
    const c = db.handle.client;
    await applySchema(c, db.database, SINGLE, withRefresh(30));
    const first = await view(db);
    expect(first?.comment).toBe(backlogViewComment(db.database, SINGLE, 30));
    expect(first?.create_table_query).toContain('REFRESH EVERY 30 SECOND APPEND TO');

    await applySchema(c, db.database, SINGLE, withRefresh(30));
    expect((await view(db))?.uuid).toBe(first?.uuid);

    await applySchema(c, db.database, SINGLE, withRefresh(45));
    const replaced = await view(db);
    expect(replaced?.uuid).not.toBe(first?.uuid);
    expect(replaced?.comment).toBe(backlogViewComment(db.database, SINGLE, 45));
    expect(replaced?.create_table_query).toContain('REFRESH EVERY 45 SECOND APPEND TO');

    await applySchema(c, db.database, SINGLE, withRefresh(0));
    expect(await view(db)).toBeUndefined();
    const [table] = await queryRows<{ n: number | string }>(
      db,
      `SELECT count() AS n FROM system.tables WHERE database = {db:String} AND name = 'hunt_backlog'`,
      { db: db.database },
    );
    expect(Number(table?.n)).toBe(1);
  });

  it('with the refresh off and no view, no DROP VIEW is sent (a user without that grant applies the schema as before)', async () => {
    const c = db.handle.client;
    await applySchema(c, db.database, SINGLE, withRefresh(0));
    const sent: string[] = [];
    // The real client, with each statement it runs noted.
    const noting = new Proxy(c, {
      get(target, key, receiver) {
        if (key === 'command') {
          return (params: { query: string }) => {
            sent.push(params.query);
            return target.command(params);
          };
        }
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    await applySchema(noting, db.database, SINGLE, withRefresh(0));
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.filter((q) => q.startsWith('DROP'))).toEqual([]);
    // With a view of the same definition there, turning it on again sends no DROP either.
    await applySchema(c, db.database, SINGLE, withRefresh(30));
    sent.length = 0;
    await applySchema(noting, db.database, SINGLE, withRefresh(30));
    expect(sent.filter((q) => q.startsWith('DROP'))).toEqual([]);
    await applySchema(c, db.database, SINGLE, withRefresh(0));
  });

  it('a period outside 0…3600 is refused before any statement', () => {
    expect(() => backlogSchemaSteps('dfe', SINGLE, 3601)).toThrow(/0 to 3600/);
    expect(() => backlogSchemaSteps('dfe', SINGLE, 1.5)).toThrow(/0 to 3600/);
    expect(() => backlogCountSql('dfe', -1)).toThrow(/0 to 3600/);
  });
});
