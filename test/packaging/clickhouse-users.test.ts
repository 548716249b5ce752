/**
 * Why docs/clickhouse-users.md gives the shim `readonly = 2`: on the real engine, the shim's
 * own queries (THE due count, the pressure rule) run with their per-query settings under
 * readonly = 2, are refused under readonly = 1, and every write is refused under both.
 * (The embedded engine has no user directory, so CREATE USER / GRANT are not run here.)
 *
 * Sharp edge: on the embedded engine a request's settings outlive the request (they stick
 * to the connection's session), and `readonly` cannot be lowered once raised. So each
 * readonly experiment gets a connection of its own, and setup/teardown use another.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quoteDatabase } from '../../src/clickhouse/identifiers.js';
import { backlogCountSql } from '../../src/coordination/backlog-refresh.js';
import { dueCountSql } from '../../src/coordination/due-sql.js';
import { applySchema } from '../../src/coordination/topology.js';
import { createOtelGaugeTable } from '../../src/pressure/otel-table.js';
import { pressureQueryParams, renderPressureSql } from '../../src/pressure/rule.js';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

describe('the shim user profile: readonly = 2', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('users');
    await applySchema(db.handle.client, db.database, { kind: 'single' });
    await createOtelGaugeTable(db.handle.client, db.database);
  });
  afterAll(async () => db?.close());

  /** A fresh connection for one experiment, closed afterwards. */
  async function withConnection(use: (client: ClickHouseHandle['client']) => Promise<void>): Promise<void> {
    const handle = await openClickHouse(db.config);
    try {
      await use(handle.client);
    } finally {
      await handle.close();
    }
  }

  const shimQueries = () => [
    { query: dueCountSql(db.database), query_params: {} },
    // With DFE_BACKLOG_REFRESH_SECONDS on, the backlog reads the server-refreshed count first.
    { query: backlogCountSql(db.database, 10), query_params: {} },
    { query: renderPressureSql(quoteDatabase(db.database)), query_params: pressureQueryParams('svc') },
  ];
  // What a catalogue query sends along (its timeout_seconds), as the shim does per request.
  const perQuery = { max_execution_time: 5 };

  it('runs the shim queries with their per-query settings under readonly = 2', async () => {
    await withConnection(async (client) => {
      for (const q of shimQueries()) {
        const rs = await client.query({ ...q, format: 'JSONEachRow', clickhouse_settings: { readonly: '2', ...perQuery } });
        expect(await rs.json()).toHaveLength(1);
      }
    });
  });

  it('refuses the same requests under readonly = 1, which is why the shim cannot use it', async () => {
    for (const q of shimQueries()) {
      await withConnection(async (client) => {
        await expect(client.query({ ...q, format: 'JSONEachRow', clickhouse_settings: { readonly: '1', ...perQuery } })).rejects.toThrow(
          /Cannot modify 'max_execution_time' setting in readonly mode/,
        );
      });
    }
  });

  it('refuses writes and DDL under readonly = 2', async () => {
    await withConnection(async (client) => {
      await expect(
        client.insert({
        table: `${db.database}.hunt_schedule`,
        values: [{ hunt_id: 'x', interval_seconds: 60, phase_offset: 0 }],
        format: 'JSONEachRow',
          clickhouse_settings: { readonly: '2' },
        }),
      ).rejects.toThrow(/readonly mode/);
      await expect(client.command({ query: `DROP TABLE ${db.database}.hunt_schedule`, clickhouse_settings: { readonly: '2' } })).rejects.toThrow(
        /readonly mode/,
      );
    });
  });
});
