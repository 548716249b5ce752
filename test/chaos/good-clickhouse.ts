import type { ClickHouseHandle } from '../../src/clickhouse/client.js';
import { openTestDatabase } from '../helpers/clickhouse.js';
import { clickHouseServerAvailability, startClickHouseServer } from '../helpers/clickhouse-server.js';

/**
 * The healthy ClickHouse the chaos tests fall back to between faults: a real
 * clickhouse-server 18.16 process when installed (an HTTP server, as in
 * production), else the embedded engine. Its one table `jobs` holds as many
 * rows as the test says, so the good value is known and can change.
 */
export interface GoodClickHouse {
  /** A URL (server) or an open handle (embedded), for SwitchableClickHouse.use(). */
  readonly target: string | ClickHouseHandle;
  readonly database: string;
  readonly description: string;
  /** Adds one row to `jobs`; returns the new count. */
  addJob(): Promise<number>;
  close(): Promise<void>;
}

export async function openGoodClickHouse(): Promise<GoodClickHouse> {
  const server = clickHouseServerAvailability();
  if (server.kind === 'available') {
    const ch = await startClickHouseServer();
    const { createClient } = await import('@clickhouse/client');
    const client = createClient({ url: ch.url });
    await client.command({ query: 'CREATE TABLE default.jobs (n UInt32) ENGINE = MergeTree ORDER BY n' });
    let rows = 0;
    return {
      target: ch.url,
      database: 'default',
      description: `clickhouse-server ${server.version}`,
      async addJob() {
        // 18.16 has no query parameters: rows go in as data, never in SQL text.
        await client.insert({ table: 'default.jobs', values: [{ n: rows + 1 }], format: 'JSONEachRow' });
        rows += 1;
        return rows;
      },
      async close() {
        await client.close();
        await ch.dispose();
      },
    };
  }
  const db = await openTestDatabase('chaos');
  await db.handle.client.command({ query: `CREATE TABLE \`${db.database}\`.jobs (n UInt32) ENGINE = MergeTree ORDER BY n` });
  let rows = 0;
  return {
    target: db.handle,
    database: db.database,
    description: `embedded engine (${server.reason})`,
    async addJob() {
      await db.handle.client.insert({ table: `\`${db.database}\`.jobs`, values: [{ n: rows + 1 }], format: 'JSONEachRow' });
      rows += 1;
      return rows;
    },
    close: () => db.close(),
  };
}
