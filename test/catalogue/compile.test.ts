import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCatalogue } from '../../src/catalogue/compile.js';
import { parseCatalogueText } from '../../src/catalogue/parse.js';
import { readFileSync } from 'node:fs';
import { defaultBuiltinPath } from '../../src/catalogue/load.js';
import { dueCountSql } from '../../src/coordination/due-sql.js';
import { applySchema } from '../../src/coordination/topology.js';
import { pressureMatchSql, pressureNameSql } from '../../src/pressure/rule.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

const DBS = { dataDatabase: 'dfe', otelDatabase: 'telemetry', builtins: SHIM_CATALOGUE_BUILTINS };
const compileText = (text: string, dbs = DBS) => compileCatalogue([parseCatalogueText(text, 'queries.yaml')], dbs);
const one = (text: string, dbs = DBS) => [...compileText(text, dbs).values()][0]!;

describe('compile (pure)', () => {
  it('database data → the data database, backtick-quoted in place of __DB__', () => {
    expect(one('queries:\n  q: {sql: SELECT count() FROM __DB__.t}\n')).toMatchObject({ database: 'data', databaseName: 'dfe', sql: 'SELECT count() FROM `dfe`.t' });
  });

  it('database otel → the otel database', () => {
    expect(one('queries:\n  q: {database: otel, sql: SELECT 1 FROM __DB__.t}\n').sql).toBe('SELECT 1 FROM `telemetry`.t');
  });

  it('a literal database name is used as written', () => {
    expect(one('queries:\n  q: {database: my-db, sql: SELECT 1 FROM __DB__.t}\n')).toMatchObject({ databaseName: 'my-db', sql: 'SELECT 1 FROM `my-db`.t' });
  });

  it('__PRESSURE_MATCH__ and __PRESSURE_NAME__ come from the pressure rule module', () => {
    expect(one('queries:\n  q: {sql: "SELECT __PRESSURE_NAME__ WHERE __PRESSURE_MATCH__"}\n').sql).toBe(`SELECT ${pressureNameSql()} WHERE ${pressureMatchSql()}`);
  });

  it('builtin hunt_backlog is THE due-count SQL on the data database', () => {
    expect(one('queries:\n  b: {builtin: hunt_backlog}\n').sql).toBe(dueCountSql('dfe').trim());
  });

  it('defaults fill every key left out', () => {
    expect(one('queries:\n  q: {sql: SELECT 1}\n')).toMatchObject({
      params: [], binds: {}, resultField: 0, clampMin: undefined, clampMax: undefined, coldHold: 0, timeoutSeconds: 5,
      metricType: 'AverageValue', deadlineMs: 2000, freshForSeconds: 0, maxStaleSeconds: null,
    });
  });

  it('the fingerprint is stable for the same definition and changes with anything that affects the answer', () => {
    const base = 'queries:\n  q: {sql: SELECT 1 FROM __DB__.t, clamp_max: 10}\n';
    const fp = (text: string, dbs = DBS) => one(text, dbs).fingerprint;
    expect([fp(base) === fp(base), fp(base) === fp(base.replace('10', '11')), fp(base) === fp(base, { ...DBS, dataDatabase: 'other' })]).toEqual([true, false, false]);
  });

  it('compiled queries are frozen', () => {
    expect(Object.isFrozen(one('queries:\n  q: {sql: SELECT 1}\n'))).toBe(true);
  });

  it('the shipped built-ins compile to backlog and pressure as docs/catalogue.md lists them', () => {
    const q = compileText(readFileSync(defaultBuiltinPath(), 'utf8'));
    expect({ backlog: q.get('backlog'), pressure: q.get('pressure') }).toMatchObject({
      backlog: { clampMin: 0, clampMax: undefined, coldHold: 0, databaseName: 'dfe', params: [], metricType: 'AverageValue' },
      pressure: { database: 'otel', databaseName: 'telemetry', params: ['service'], binds: { window_seconds: 60 }, clampMin: 0, clampMax: 100, coldHold: 0, metricType: 'Value' },
    });
  });
});

describe('compiled SQL on the real engine', () => {
  let db: TestDatabase;
  let otel: string;
  const builtins = () => compileText(readFileSync(defaultBuiltinPath(), 'utf8'), { dataDatabase: db.database, otelDatabase: otel, builtins: SHIM_CATALOGUE_BUILTINS });

  beforeAll(async () => {
    db = await openTestDatabase('catalogue');
    await applySchema(db.handle.client, db.database, { kind: 'single' });
    otel = `${db.database}_otel`;
    const c = db.handle.client;
    await c.command({ query: `CREATE DATABASE IF NOT EXISTS \`${otel}\`` });
    // The columns of the OTel exporter's gauge table that the pressure SQL reads.
    await c.command({
      query: `CREATE TABLE \`${otel}\`.otel_metrics_gauge (ResourceAttributes Map(LowCardinality(String), String),
        ServiceName LowCardinality(String), MetricName String, Attributes Map(LowCardinality(String), String),
        TimeUnix DateTime64(9), Value Float64, Flags UInt32) ENGINE = MergeTree ORDER BY (ServiceName, MetricName)`,
    });
  });
  afterAll(async () => {
    await db?.handle.client.command({ query: `DROP DATABASE IF EXISTS \`${otel}\`` });
    await db?.close();
  });

  it('the backlog query counts a due hunt', async () => {
    const backlog = builtins().get('backlog')!;
    const before = await queryRows<{ value: string | number }>(db, backlog.sql);
    await db.handle.client.insert({
      table: `${db.database}.hunt_schedule`,
      values: [{ hunt_id: 'due-now', interval_seconds: 60, phase_offset: 0 }],
      format: 'JSONEachRow',
    });
    const after = await queryRows<{ value: string | number }>(db, backlog.sql);
    expect([Number(before[0]?.value), Number(after[0]?.value)]).toEqual([0, 1]);
  });

  it('a __DB__ query reads the resolved database', async () => {
    const q = one('queries:\n  q: {sql: "SELECT count() AS value FROM __DB__.hunt_schedule WHERE hunt_id = {id:String}", params: [id]}\n', {
      dataDatabase: db.database,
      otelDatabase: otel,
      builtins: SHIM_CATALOGUE_BUILTINS,
    });
    const rows = await queryRows<{ value: string | number }>(db, q.sql, { id: 'due-now' });
    expect(Number(rows[0]?.value)).toBe(1);
  });

  it('the pressure query answers 0 with no rows, then the hottest series average (clamped)', async () => {
    const pressure = builtins().get('pressure')!;
    // Read column result_field of row 0, as the shim does (the pressure helper owns the SQL and its column names).
    const run = async () =>
      Object.values((await queryRows<Record<string, unknown>>(db, pressure.sql, { ...pressure.binds, service: 'svc' }))[0] ?? {})[pressure.resultField as number];
    const empty = await run();
    const pod = (id: string) => ({ 'service.instance.id': id });
    const rows = [
      { ResourceAttributes: pod('a'), MetricName: 'scaling_pressure', Value: 10 },
      { ResourceAttributes: pod('a'), MetricName: 'scaling_pressure', Value: 30 },
      { ResourceAttributes: pod('b'), MetricName: 'app_scaling_pressure', Value: 50 },
      { ResourceAttributes: pod('c'), MetricName: 'scaling_pressure', Value: 99, Flags: 1 }, // staleness marker
      { ResourceAttributes: pod('d'), MetricName: 'scaling_pressure_total', Value: 90 }, // not the rule's name
    ].map((r) => ({ ServiceName: 'svc', Attributes: {}, TimeUnix: Date.now() * 1e6, Flags: 0, ...r }));
    await db.handle.client.insert({ table: `${otel}.otel_metrics_gauge`, values: rows, format: 'JSONEachRow', clickhouse_settings: { date_time_input_format: 'best_effort' } });
    expect([empty, await run()]).toEqual([0, 50]);
  });
});
