import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { Coordinator } from '../../src/coordination/coordinator.js';
import { applySchema } from '../../src/coordination/topology.js';
import { schemaDdl } from '../../src/coordination/schema.js';
import { DEFAULT_SCHEMA_OPTIONS, TABLE_DEFS } from '../../src/coordination/tables.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * docs/tables.md: `schema --apply` on tables the ORIGINAL created (its columns
 * only) adds this project's columns with their defaults, keeps the old rows,
 * and a second apply changes nothing. Run on the real embedded engine.
 */
const ORIGINAL: Record<string, string> = {
  hunt_schedule:
    '(hunt_id String, interval_seconds Int64, phase_offset Int64, enabled UInt8 DEFAULT 1, updated DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(updated) ORDER BY hunt_id',
  hunt_lease:
    '(hunt_id String, owner String, fire Int64, lease_until Int64, claimed DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(claimed) ORDER BY hunt_id',
  hunt_watermark: '(hunt_id String, watermark Int64, updated DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(updated) ORDER BY hunt_id',
  hunt_state:
    '(hunt_id String, overrun_count Int64, too_aggressive UInt8, updated DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(updated) ORDER BY hunt_id',
  hunt_run:
    '(hunt_id String, fire Int64, status String, rows_written Int64, updated DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(updated) ORDER BY (hunt_id, fire)',
  hunt_runner_heartbeat:
    '(runner_id String, seen Int64, poll_seconds Float64, updated DateTime64(3) DEFAULT now64(3)) ENGINE = ReplacingMergeTree(updated) ORDER BY runner_id TTL toDateTime(updated) + INTERVAL 7 DAY',
};

const ADDED: Record<string, Record<string, string>> = {
  hunt_schedule: { offset_source: 'LowCardinality(String)', moved_at: 'DateTime64(3)' },
  hunt_run: { duration_ms: 'Int64', cpu_us: 'Int64', memory_bytes: 'Int64', error_code: 'Int32', skipped_from: 'Int64', skipped_to: 'Int64' },
  hunt_state: { disabled_reason: 'String', disabled_at: 'DateTime64(3)' },
};

/** 64-bit integers come back as strings from a server and as numbers from the embedded engine. */
function plain(row: Record<string, unknown> | undefined): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row ?? {}).map(([k, v]) => [k, typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v]));
}

type ColumnRow = { table: string; name: string; type: string; default_expression: string };

let db: TestDatabase;
beforeAll(async () => {
  db = await openTestDatabase('schema');
});
afterAll(async () => db?.close());

async function columns(database: string): Promise<ColumnRow[]> {
  return queryRows<ColumnRow>(
    db,
    'SELECT table, name, type, default_expression FROM system.columns WHERE database = {db:String} ORDER BY table, position',
    { db: database },
  );
}

async function engineFull(database: string, table: string): Promise<string> {
  const rows = await queryRows<{ engine_full: string }>(db, 'SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}', {
    db: database,
    t: table,
  });
  return rows[0]?.engine_full ?? '';
}

async function mutationCount(database: string): Promise<number> {
  const rows = await queryRows<{ n: string | number }>(db, 'SELECT count() AS n FROM system.mutations WHERE database = {db:String}', { db: database });
  return Number(rows[0]?.n);
}

async function tableDdl(database: string): Promise<string[]> {
  const rows = await queryRows<{ create_table_query: string }>(
    db,
    "SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name LIKE 'hunt%' ORDER BY name",
    { db: database },
  );
  return rows.map((r) => r.create_table_query);
}

describe('schema --apply on the original tables', () => {
  it('adds the new columns with defaults, old rows read them back, and a second apply is a no-op', async () => {
    const c = db.handle.client;
    for (const [name, body] of Object.entries(ORIGINAL)) {
      await c.command({ query: `CREATE TABLE \`${db.database}\`.${name} ${body}` });
    }
    // Rows the original wrote, before the upgrade.
    await c.command({ query: `INSERT INTO \`${db.database}\`.hunt_schedule (hunt_id, interval_seconds, phase_offset) VALUES ('h', 300, 139)` });
    await c.command({ query: `INSERT INTO \`${db.database}\`.hunt_run (hunt_id, fire, status, rows_written) VALUES ('h', 1900000000, 'succeeded', 7)` });
    await c.command({ query: `INSERT INTO \`${db.database}\`.hunt_state (hunt_id, overrun_count, too_aggressive) VALUES ('h', 2, 0)` });

    await applySchema(c, db.database, { kind: 'single' });

    const after = await columns(db.database);
    for (const [table, cols] of Object.entries(ADDED)) {
      for (const [name, type] of Object.entries(cols)) {
        expect(after.find((r) => r.table === table && r.name === name)?.type, `${table}.${name}`).toBe(type);
      }
    }
    const [schedule] = await queryRows<Record<string, unknown>>(
      db,
      `SELECT hunt_id, phase_offset, offset_source, toUnixTimestamp64Milli(moved_at) AS moved_ms FROM \`${db.database}\`.hunt_schedule`,
    );
    expect(plain(schedule)).toEqual({ hunt_id: 'h', phase_offset: 139, offset_source: 'hash', moved_ms: 0 });
    const [run] = await queryRows<Record<string, unknown>>(
      db,
      `SELECT rows_written, duration_ms, cpu_us, memory_bytes, error_code, skipped_from, skipped_to FROM \`${db.database}\`.hunt_run`,
    );
    expect(plain(run)).toEqual({ rows_written: 7, duration_ms: 0, cpu_us: 0, memory_bytes: 0, error_code: 0, skipped_from: 0, skipped_to: 0 });
    const [state] = await queryRows<Record<string, unknown>>(
      db,
      `SELECT overrun_count, disabled_reason, toUnixTimestamp64Milli(disabled_at) AS disabled_ms FROM \`${db.database}\`.hunt_state`,
    );
    expect(plain(state)).toEqual({ overrun_count: 2, disabled_reason: '', disabled_ms: 0 });

    // hunt_run gained the default retention and the status skip index.
    expect(await engineFull(db.database, 'hunt_run')).toMatch(/TTL toDateTime\(updated\) \+ toIntervalDay\(90\)( |$)/);
    expect((await tableDdl(db.database)).find((q) => q.includes('.hunt_run'))).toContain('INDEX status_set status TYPE set(8) GRANULARITY 1');
    // The original's heartbeat TTL is left as it was.
    expect(await engineFull(db.database, 'hunt_runner_heartbeat')).toMatch(/TTL toDateTime\(updated\) \+ toIntervalDay\(7\)/);

    // Second apply: same columns, same table definitions, no further mutation queued.
    const ddlBefore = await tableDdl(db.database);
    const mutationsBefore = await mutationCount(db.database);
    await applySchema(c, db.database, { kind: 'single' });
    expect(await columns(db.database)).toEqual(after);
    expect(await tableDdl(db.database)).toEqual(ddlBefore);
    expect(await mutationCount(db.database)).toBe(mutationsBefore);
    // The old rows are still there (the TTL is 90 days from their write).
    expect((await queryRows(db, `SELECT * FROM \`${db.database}\`.hunt_run`)).length).toBe(1);
  });

  it('a changed retention setting is applied by MODIFY TTL once, then not again', async () => {
    const c = db.handle.client;
    await applySchema(c, db.database, { kind: 'single' }, { ...DEFAULT_SCHEMA_OPTIONS, runRetentionDays: 30 });
    expect(await engineFull(db.database, 'hunt_run')).toMatch(/TTL toDateTime\(updated\) \+ toIntervalDay\(30\)( |$)/);
    const mutations = await mutationCount(db.database);
    const ddl = await tableDdl(db.database);
    await applySchema(c, db.database, { kind: 'single' }, { ...DEFAULT_SCHEMA_OPTIONS, runRetentionDays: 30 });
    expect(await mutationCount(db.database)).toBe(mutations);
    expect(await tableDdl(db.database)).toEqual(ddl);
    await applySchema(c, db.database, { kind: 'single' });
    expect(await engineFull(db.database, 'hunt_run')).toMatch(/TTL toDateTime\(updated\) \+ toIntervalDay\(90\)( |$)/);
  });

  it('fresh tables get every column from CREATE, in the same order as an upgraded one', async () => {
    const fresh = `${db.database}_fresh`;
    await db.handle.client.command({ query: `CREATE DATABASE \`${fresh}\`` });
    try {
      await applySchema(db.handle.client, fresh, { kind: 'single' });
      const got = (await columns(fresh)).map((r) => `${r.table}.${r.name} ${r.type}`);
      const upgraded = (await columns(db.database)).map((r) => `${r.table}.${r.name} ${r.type}`);
      expect(got).toEqual(upgraded);
      expect(got).toContain('hunt_state.disabled_reason String');
    } finally {
      await db.handle.client.command({ query: `DROP DATABASE IF EXISTS \`${fresh}\`` });
    }
  });
});

describe('schema --print', () => {
  it('shows the added columns in CREATE and as ADD COLUMN IF NOT EXISTS, ON CLUSTER on a cluster', () => {
    const single = schemaDdl('dfe', { kind: 'single' });
    const cluster = schemaDdl('dfe', { kind: 'cluster', cluster: 'c1' });
    for (const [table, cols] of Object.entries(ADDED)) {
      const create = single.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS \`dfe\`.\`${table}\``));
      const alter = single.find((s) => s.startsWith(`ALTER TABLE \`dfe\`.\`${table}\` `));
      const clusterAlter = cluster.find((s) => s.startsWith(`ALTER TABLE \`dfe\`.\`${table}\` ON CLUSTER 'c1' `));
      for (const [name, type] of Object.entries(cols)) {
        expect(create).toContain(`${name} ${type} DEFAULT`);
        expect(alter).toContain(`ADD COLUMN IF NOT EXISTS ${name} ${type} DEFAULT`);
        expect(clusterAlter).toContain(`ADD COLUMN IF NOT EXISTS ${name} ${type} DEFAULT`);
      }
    }
    expect(single).toContain('ALTER TABLE `dfe`.`hunt_run` MODIFY TTL toDateTime(updated) + toIntervalDay(90)');
    expect(schemaDdl('dfe', { kind: 'single' }, { ...DEFAULT_SCHEMA_OPTIONS, runRetentionDays: 7 })).toContain(
      'ALTER TABLE `dfe`.`hunt_run` MODIFY TTL toDateTime(updated) + toIntervalDay(7)',
    );
    expect(cluster).toContain("ALTER TABLE `dfe`.`hunt_run` ON CLUSTER 'c1' MODIFY TTL toDateTime(updated) + toIntervalDay(90)");
    expect(single.find((q) => q.startsWith('CREATE TABLE IF NOT EXISTS `dfe`.`hunt_run`'))).toMatch(
      /INDEX status_set status TYPE set\(8\) GRANULARITY 1\) ENGINE .* TTL toDateTime\(updated\) \+ toIntervalDay\(90\)$/,
    );
    expect(() => schemaDdl('dfe', { kind: 'single' }, { ...DEFAULT_SCHEMA_OPTIONS, runRetentionDays: 0 })).toThrow(/runRetentionDays/);
    // Tables that add nothing get no ALTER.
    const withAdds = TABLE_DEFS.filter((d) => d.added?.length).map((d) => d.name);
    expect(single.filter((s) => s.includes('ADD COLUMN')).length).toBe(withAdds.length);
  });
});

describe('DFE_HUNT_RUN_RETENTION_DAYS', () => {
  it('defaults to 90 days and rejects anything but a whole number of days, naming the variable', () => {
    expect(loadConfig({}).clickhouse.runRetentionDays).toBe(90);
    expect(loadConfig({ DFE_HUNT_RUN_RETENTION_DAYS: '30' }).clickhouse.runRetentionDays).toBe(30);
    for (const bad of ['0', '-1', '1.5', 'ninety', '36501']) {
      expect(() => loadConfig({ DFE_HUNT_RUN_RETENTION_DAYS: bad }), bad).toThrow(/DFE_HUNT_RUN_RETENTION_DAYS/);
    }
  });
});

describe('hunt_state writes keep an auto-disable', () => {
  it('an overrun row carries the newest disabled_reason over; only enable clears it', async () => {
    const database = `${db.database}_state`;
    const c = db.handle.client;
    await c.command({ query: `CREATE DATABASE \`${database}\`` });
    try {
      await applySchema(c, database, { kind: 'single' });
      const coordinator = new Coordinator(c, database, { read: {}, write: {} });
      await coordinator.addOverrun('fresh');
      await c.insert({
        table: `${database}.hunt_state`,
        values: [{ hunt_id: 'h', overrun_count: 4, too_aggressive: 0, disabled_reason: 'memory_limit', disabled_at: '2026-01-01 00:00:00.000', updated: '2026-01-01 00:00:00.000' }],
        format: 'JSONEachRow',
      });
      await coordinator.addOverrun('h');
      const rows = await queryRows<Record<string, unknown>>(
        db,
        `SELECT hunt_id, argMax(overrun_count, updated) AS n, argMax(disabled_reason, updated) AS reason,
                toUnixTimestamp64Milli(argMax(disabled_at, updated)) AS at
         FROM \`${database}\`.hunt_state GROUP BY hunt_id ORDER BY hunt_id`,
      );
      expect(rows.map(plain)).toEqual([
        { hunt_id: 'fresh', n: 1, reason: '', at: 0 },
        { hunt_id: 'h', n: 5, reason: 'memory_limit', at: Date.UTC(2026, 0, 1) },
      ]);
    } finally {
      await c.command({ query: `DROP DATABASE IF EXISTS \`${database}\`` });
    }
  });
});

describe('topology: one logical set of coordination tables', () => {
  it('on a cluster, every table is one replication group: no {shard} in the path, a cluster-wide unique replica name', () => {
    const ddl = schemaDdl('dfe', { kind: 'cluster', cluster: 'prod' });
    // hunt_backlog is the server-refreshed count, local to each server (backlog-refresh.test.ts).
    const creates = ddl.filter((q) => q.startsWith('CREATE TABLE') && !q.includes('`hunt_backlog`'));
    expect(creates).toHaveLength(TABLE_DEFS.length);
    for (const def of TABLE_DEFS) {
      const create = creates.find((q) => q.startsWith(`CREATE TABLE IF NOT EXISTS \`dfe\`.\`${def.name}\` ON CLUSTER 'prod' (`));
      const engine = /ENGINE = (\w+)\('([^']*)', '([^']*)', (\w+)\)/.exec(create ?? '');
      expect(engine?.slice(1), def.name).toEqual([
        'ReplicatedReplacingMergeTree',
        '/clickhouse/tables/dfe_coordination/{database}/{table}',
        '{shard}-{replica}',
        def.version,
      ]);
      // The path is the same on every shard: nothing in it varies per shard.
      expect(engine?.[2]).not.toMatch(/\{shard\}|\{replica\}/);
    }
    // Every DDL statement runs ON CLUSTER, so each node creates and alters its replica.
    expect(ddl.every((q) => q.includes(" ON CLUSTER 'prod'"))).toBe(true);
  });

  it('macros expand to one path for all shards and distinct replica names', () => {
    // Expand the macros the way the server does for a 2-shard x 2-replica cluster whose
    // replica macro repeats across shards (r1, r2 on each shard).
    const nodes = [
      { shard: '01', replica: 'r1' },
      { shard: '01', replica: 'r2' },
      { shard: '02', replica: 'r1' },
      { shard: '02', replica: 'r2' },
    ];
    const expand = (text: string, m: Record<string, string>) => text.replace(/\{(\w+)\}/g, (_, k: string) => m[k] ?? `{${k}}`);
    const create = schemaDdl('dfe', { kind: 'cluster', cluster: 'prod' }).find((q) => q.includes('`hunt_lease`')) ?? '';
    const [, path = '', replica = ''] = /Tree\('([^']*)', '([^']*)'/.exec(create) ?? [];
    const expanded = nodes.map((n) => ({ ...n, database: 'dfe', table: 'hunt_lease' })).map((m) => [expand(path, m), expand(replica, m)]);
    expect(new Set(expanded.map(([p]) => p))).toEqual(new Set(['/clickhouse/tables/dfe_coordination/dfe/hunt_lease']));
    expect(new Set(expanded.map(([, r]) => r)).size).toBe(nodes.length);
  });

  it('single and Replicated-database topologies are unchanged', () => {
    expect(schemaDdl('dfe', { kind: 'single' }).find((q) => q.includes('`hunt_lease`'))).toContain('ENGINE = ReplacingMergeTree(claimed)');
    const replicatedDb = schemaDdl('dfe', { kind: 'replicated-database' });
    expect(replicatedDb.find((q) => q.includes('`hunt_lease`'))).toContain('ENGINE = ReplicatedReplacingMergeTree(claimed)');
    expect(replicatedDb.some((q) => q.includes('ON CLUSTER'))).toBe(false);
  });
});
