import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { malformedServer, swappableServerHandle, type FaultEndpoint, type MalformedKind, type SwappableHandle } from '../helpers/faults.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * Issue 9 items 1 and 2 over REAL sockets and the real engine: a 200 whose
 * body is not a usable result, and a result KEDA cannot carry, are failures.
 * A good value from the real engine first; then the client is switched to a
 * fault server (as if ClickHouse, or a proxy in front of it, went bad). The
 * last good value must hold, the failure must be counted with its reason, and
 * the cache must not be overwritten (ClickHouse back → the same last good).
 */
let db: TestDatabase;
let t: AppUnderTest;
let swap: SwappableHandle;
const clock = new ManualClock(7_000_000);
const faults = new Map<MalformedKind, { endpoint: FaultEndpoint; client: ClickHouseClient }>();

const KINDS: Array<[MalformedKind, 'bad_result' | 'error']> = [
  ['short-row', 'bad_result'],
  ['object-rows', 'bad_result'],
  ['data-not-array', 'bad_result'],
  ['exception', 'error'],
  ['huge', 'bad_result'],
  ['over-int64', 'bad_result'],
];

beforeAll(async () => {
  db = await openTestDatabase('shim_answers');
  for (const [kind] of KINDS) {
    const endpoint = await malformedServer(kind);
    faults.set(kind, { endpoint, client: createClient({ url: endpoint.url, log: { level: ClickHouseLogLevel.OFF } }) });
  }
  swap = swappableServerHandle(db.handle.client);
  const clickhouse = swap.handle;
  const databaseSql = (sql: string) => sql.replace('__DB__', `\`${db.database}\``);
  const queries = [
    compiled('count', 'SELECT 0 AS a, count() AS value FROM numbers({n:UInt32})', { params: ['n'], resultField: 'value', deadlineMs: 2_000, timeoutSeconds: 5, coldHold: 4 }),
    compiled('big', databaseSql('SELECT value FROM __DB__.big_values'), { deadlineMs: 2_000, timeoutSeconds: 5, coldHold: 3 }),
    compiled('pressure', 'SELECT 80 + length({service:String}) * 0', { params: ['service'], metricType: 'Value' }),
  ];
  t = await makeApp({ queries, clickhouse, clock });
});
afterAll(async () => {
  await t?.app.close();
  for (const { endpoint, client } of faults.values()) {
    await client.close();
    await endpoint.close();
  }
  await db?.close();
});

const metricsText = async () => (await get(t.app, '/metrics')).body.text as string;
const failsafeCount = async (query: string, reason: string) =>
  Number(new RegExp(`failsafe_answers_total\\{query="${query}",reason="${reason}"\\} (\\d+)`).exec(await metricsText())?.[1] ?? 0);

describe('a 200 that is not a usable result (fault servers on real sockets)', () => {
  it.each(KINDS)('%s: the last good value holds, counted as %s, never cached', async (kind, reason) => {
    swap.use(db.handle.client);
    expect((await get(t.app, '/q/count?n=12')).body).toEqual({ value: 12, source: 'fresh', age_seconds: 0 });
    const before = await failsafeCount('count', reason);
    swap.use(faults.get(kind)!.client);
    clock.advance(1_000);
    expect((await get(t.app, '/q/count?n=12')).body).toEqual({ value: 12, source: 'last_good', age_seconds: 1 });
    // A cold key gets cold_hold, not a "fresh" 0 or a digit of something.
    expect((await get(t.app, `/q/count?n=${kind.length}`)).body).toMatchObject({ value: 4, source: 'cold_hold' });
    expect(await failsafeCount('count', reason)).toBe(before + 2);
    const status = (await get(t.app, '/status')).body as { queries: { count: { last_error: { reason: string } } } };
    expect(status.queries.count.last_error.reason).toBe(reason);
    expect(faults.get(kind)!.endpoint.hits()).toBeGreaterThan(0);
    // Back to the real engine: the cache still held 12 (the failure did not overwrite it).
    swap.use(db.handle.client);
    clock.advance(1_000);
  });
});

describe('the servable range (|value| × 1000 < 2^63), on the real engine', () => {
  it('a result KEDA cannot carry is a failure: last good holds, never 0, never null', async () => {
    swap.use(db.handle.client);
    const table = `\`${db.database}\`.big_values`;
    await db.handle.client.command({ query: `CREATE TABLE ${table} (value Float64) ENGINE = Memory` });
    const set = async (v: number) => {
      await db.handle.client.command({ query: `TRUNCATE TABLE ${table}` });
      await db.handle.client.insert({ table, values: [{ value: v }], format: 'JSONEachRow' });
    };
    await set(1234.5);
    expect((await get(t.app, '/q/big')).body).toEqual({ value: 1234.5, source: 'fresh', age_seconds: 0 });
    const failures = await failsafeCount('big', 'bad_result');
    // 9223372036854775 is not a float64: it is …776, whose × 1000 is 2^63.
    for (const v of [Number('9223372036854775'), 1e16, 1.8e305, 1e306, -1e300]) {
      await set(v);
      expect((await get(t.app, '/q/big')).body, String(v)).toEqual({ value: 1234.5, source: 'last_good', age_seconds: 0 });
    }
    expect(await failsafeCount('big', 'bad_result')).toBe(failures + 5);
    await set(9223372036854774);
    expect((await get(t.app, '/q/big')).body).toEqual({ value: 9223372036854774, source: 'fresh', age_seconds: 0 });
  });

  it('hold outside the range is a 400 naming the param and the value', async () => {
    for (const hold of ['1e306', '9223372036854775', '1e16']) {
      const res = await get(t.app, `/keda/pressure?service=a&hold=${hold}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toContain(`hold=${JSON.stringify(hold)}`);
      expect(res.body.error).toMatch(/9223372036854774/);
    }
    const ok = await get(t.app, '/keda/pressure?service=a&hold=9223372036854774');
    expect(ok.status).toBe(200);
  });
});
