import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * A batched query on the real engine (docs/catalogue.md#batch): one ClickHouse
 * query for many keys, and each key still its own — its own value, its own
 * failure, its own last-good entry. Values travel as one bound array.
 */
let db: TestDatabase;
let t: AppUnderTest;

const batchOf = (database: string) => ({
  param: 'k',
  maxSize: 100,
  windowMs: 20,
  sql: `SELECT k, v FROM \`${database}\`.kv WHERE k IN {k:Array(String)}`,
});

async function put(rows: { k: string; v: number | string }[]): Promise<void> {
  await db.handle.client.insert({ table: `${db.database}.kv`, values: rows, format: 'JSONEachRow' });
}

const poll = (keys: readonly string[]) => Promise.all(keys.map((k) => get(t.app, `/q/kv?k=${encodeURIComponent(k)}`)));

beforeAll(async () => {
  db = await openTestDatabase('shim_batch');
  await db.handle.client.command({ query: `CREATE TABLE \`${db.database}\`.kv (k String, v Float64) ENGINE = MergeTree ORDER BY k` });
  const kv = compiled('kv', `SELECT v FROM \`${db.database}\`.kv WHERE k = {k:String}`, {
    params: ['k'],
    coldHold: 7,
    // Answers, not speed, are under test: no answer is held for a slow machine.
    deadlineMs: 60_000,
    timeoutSeconds: 120,
    batch: batchOf(db.database),
  });
  // The same query under other names: a window no test would outwait (a lone key must not wait
  // on it), and the default window for the burst.
  const lone = compiled('lone', kv.sql, { ...kv, name: 'lone', batch: { ...batchOf(db.database), windowMs: 50_000 } });
  const burst = compiled('burst', kv.sql, { ...kv, name: 'burst', batch: { ...batchOf(db.database), maxSize: 500, windowMs: 10 } });
  t = await makeApp({ queries: [kv, lone, burst], clickhouse: db.handle });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

describe('a batched query', () => {
  it('answers each key its own row in one query; a key with no row gets the no-rows answer (0)', async () => {
    await put([
      { k: 'a', v: 1.5 },
      { k: 'b', v: 2 },
      { k: 'c.d:e-f', v: 3 },
    ]);
    const before = t.app.shim.executor.queriesStarted;
    const answers = await poll(['a', 'b', 'c.d:e-f', 'none']);
    expect(answers.map((a) => a.body)).toEqual([
      { value: 1.5, source: 'fresh', age_seconds: 0 },
      { value: 2, source: 'fresh', age_seconds: 0 },
      { value: 3, source: 'fresh', age_seconds: 0 },
      { value: 0, source: 'fresh', age_seconds: 0 },
    ]);
    expect(t.app.shim.executor.queriesStarted - before).toBeGreaterThanOrEqual(1);
    expect(t.app.shim.executor.queriesStarted - before).toBeLessThan(4);
  });

  it('one key\'s bad value fails that key alone (its last-good holds); the others stay fresh', async () => {
    await put([{ k: 'bad', v: 5 }]);
    expect((await poll(['bad']))[0]?.body).toEqual({ value: 5, source: 'fresh', age_seconds: 0 });
    // `bad` now has a second row (ambiguous) and `inf` a non-finite value.
    await put([
      { k: 'bad', v: 6 },
      { k: 'inf', v: 'inf' },
    ]);
    const answers = await poll(['a', 'bad', 'inf', 'b']);
    expect(answers.map((a) => [a.body.source, a.body.value])).toEqual([
      ['fresh', 1.5],
      ['last_good', 5],
      ['cold_hold', 7],
      ['fresh', 2],
    ]);
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('dfe_keda_shim_failsafe_answers_total{query="kv",reason="bad_result"} 2');
    expect(metrics).toMatch(/dfe_keda_shim_batch_size_count\{query="kv"\} [1-9]/);
  });

  it('a value the route refuses never reaches a batch; allowed punctuation is matched exactly', async () => {
    // The route's own check keeps such values out (400); what reaches the batch is bound as an array element.
    const res = await get(t.app, `/q/kv?k=${encodeURIComponent("x'] OR 1=1 --")}`);
    expect(res.status).toBe(400);
    await put([{ k: 'x.y:z-1_2', v: 9 }]);
    expect((await poll(['x.y:z-1_2']))[0]?.body).toEqual({ value: 9, source: 'fresh', age_seconds: 0 });
  });

  it('single-flight per key: concurrent requests of one key join it, the batch holds the key once', async () => {
    const sizeSum = async () => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
      return Number(/dfe_keda_shim_batch_size_sum\{query="kv"\} (\S+)/.exec(text)?.[1] ?? Number.NaN);
    };
    const before = await sizeSum();
    const answers = await poll(['a', 'a', 'a', 'b', 'b']);
    expect(answers.map((a) => [a.body.source, a.body.value])).toEqual([
      ['fresh', 1.5],
      ['fresh', 1.5],
      ['fresh', 1.5],
      ['fresh', 2],
      ['fresh', 2],
    ]);
    expect((await sizeSum()) - before).toBe(2);
  });

  it('a failure of the whole query fails every key of the batch, each from its own fail-safe entry', async () => {
    await db.handle.client.command({ query: `RENAME TABLE \`${db.database}\`.kv TO \`${db.database}\`.kv_gone` });
    try {
      const answers = await poll(['a', 'b', 'never-seen']);
      expect(answers.map((a) => [a.body.source, a.body.value])).toEqual([
        ['last_good', 1.5],
        ['last_good', 2],
        ['cold_hold', 7],
      ]);
    } finally {
      await db.handle.client.command({ query: `RENAME TABLE \`${db.database}\`.kv_gone TO \`${db.database}\`.kv` });
    }
  });

  it('a lone key is sent at once, never waiting for company: one query, before the next key arrives', async () => {
    await put([
      { k: 'solo-1', v: 11 },
      { k: 'solo-2', v: 12 },
    ]);
    const executor = t.app.shim.executor;
    const before = executor.queriesStarted;
    const first = get(t.app, '/q/lone?k=solo-1');
    // Turn the event loop (no clock) until the first key's query has started; the second key
    // arrives only then. With a window that held a lone key, this would never end in the test's time.
    for (let turns = 0; executor.queriesStarted === before; turns++) {
      expect(turns).toBeLessThan(100_000);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(executor.queriesStarted - before).toBe(1);
    const second = get(t.app, '/q/lone?k=solo-2');
    const answers = await Promise.all([first, second]);
    expect(answers.map((a) => a.body)).toEqual([
      { value: 11, source: 'fresh', age_seconds: 0 },
      { value: 12, source: 'fresh', age_seconds: 0 },
    ]);
    expect(executor.queriesStarted - before).toBe(2);
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('dfe_keda_shim_batch_size_sum{query="lone"} 2');
    expect(metrics).toContain('dfe_keda_shim_batch_size_count{query="lone"} 2');
  });

  it('a burst of 1 000 distinct keys at once: at most 4 queries, every answer fresh', async () => {
    const keys = Array.from({ length: 1_000 }, (_, i) => `burst-${i}`);
    await put(keys.map((k, i) => ({ k, v: i })));
    const before = t.app.shim.executor.queriesStarted;
    const answers = await Promise.all(keys.map((k) => get(t.app, `/q/burst?k=${k}`)));
    expect(answers.filter((a) => a.body.source === 'fresh').length).toBe(1_000);
    expect(answers.map((a) => a.body.value)).toEqual(keys.map((_, i) => i));
    const started = t.app.shim.executor.queriesStarted - before;
    expect(started).toBeGreaterThanOrEqual(2); // 500 keys at most per query
    expect(started).toBeLessThanOrEqual(4);
  });
});

