import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { startEngineFront, type EngineFront } from '../../src/clickhouse/http-front.js';
import { loadConfig } from '../../src/config/load.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * The HTTP front's engine-time observer (src/clickhouse/http-front.ts `onEngineTime`): one
 * call per query the engine ran, failed ones too, none for a ping; the answers unchanged.
 */
let db: TestDatabase;
let front: EngineFront;
let client: ClickHouseHandle;
const engineTimes: number[] = [];

beforeAll(async () => {
  db = await openTestDatabase('http_front');
  front = await startEngineFront(db.handle, { onEngineTime: (ms) => engineTimes.push(ms) });
  client = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: front.url }).clickhouse);
});
afterAll(async () => {
  await client?.close();
  await front?.close();
  await db?.close();
});

describe('startEngineFront onEngineTime', () => {
  it('reports each query the engine ran, in order, a failed one too, and no ping', async () => {
    const rs = await client.client.query({ query: 'SELECT {n:UInt8} + 1 AS v', query_params: { n: 1 }, format: 'JSONEachRow' });
    expect(await rs.json<{ v: number }>()).toEqual([{ v: 2 }]);
    expect((await client.client.ping()).success).toBe(true);
    await expect(client.client.query({ query: 'SELECT * FROM no_such_table_here', format: 'JSONEachRow' })).rejects.toThrow(/no_such_table_here/);
    expect(front.queries()).toBe(2);
    expect(engineTimes).toHaveLength(2);
    for (const ms of engineTimes) expect(ms).toBeGreaterThanOrEqual(0);
  });
});

describe('startEngineFront settings', () => {
  it('runs every query with its settings unless the URL sets them', async () => {
    const pinned = await startEngineFront(db.handle, { settings: { max_threads: '7' } });
    const viaPinned = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: pinned.url }).clickhouse);
    try {
      const read = async (settings?: Record<string, string>) => {
        const rs = await viaPinned.client.query({ query: "SELECT toUInt64(getSetting('max_threads')) AS t", format: 'JSONEachRow', ...(settings ? { clickhouse_settings: settings } : {}) });
        return Number((await rs.json<{ t: number | string }>())[0]?.t);
      };
      expect(await read()).toBe(7);
      expect(await read({ max_threads: '3' })).toBe(3);
    } finally {
      await viaPinned.close();
      await pinned.close();
    }
  });
});
