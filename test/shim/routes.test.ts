import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * The query routes through app.inject() against the real (embedded) engine:
 * fresh values come from SQL, failures from real ClickHouse errors (throwIf,
 * non-numeric data), never from a stand-in.
 */
let db: TestDatabase;
let t: AppUnderTest;
const clock = new ManualClock(1_000_000);

const started = () => t.app.shim.executor.queriesStarted;
const exec = (sql: string) => db.handle.client.command({ query: sql });

beforeAll(async () => {
  db = await openTestDatabase('shim_routes');
  const d = `\`${db.database}\``;
  await exec(`CREATE TABLE ${d}.jobs (service String, n Float64) ENGINE = MergeTree ORDER BY service`);
  await exec(`INSERT INTO ${d}.jobs VALUES ('a', 1.5), ('a', 2), ('b', 40), ('c', 100)`);
  await exec(`CREATE TABLE ${d}.knob (v Nullable(String), fail UInt8) ENGINE = Memory`);
  const queries = [
    compiled('jobs', `SELECT count() AS value, sum(n) AS total FROM ${d}.jobs WHERE service = {service:String}`, {
      params: ['service'],
      resultField: 'total',
    }),
    compiled('clamped', `SELECT sum(n) FROM ${d}.jobs`, { clampMin: 0, clampMax: 50 }),
    compiled('empty', `SELECT n FROM ${d}.jobs WHERE service = 'nobody'`, { coldHold: 9 }),
    compiled('knob', `SELECT throwIf(any(fail) = 1, 'knob says fail') AS f, any(v) AS v FROM ${d}.knob`, {
      resultField: 1,
      coldHold: 3,
      maxStaleSeconds: 60,
    }),
    compiled('valueq', `SELECT throwIf(any(fail) = 1, 'knob says fail') AS f, toFloat64OrNull(any(v)) * {k:Float64} AS v FROM ${d}.knob WHERE {service:String} != ''`, {
      params: ['service'],
      binds: { k: 1 },
      resultField: 'v',
      metricType: 'Value',
      coldHold: 0,
    }),
    compiled('young', `SELECT count() FROM ${d}.jobs`, { freshForSeconds: 30 }),
    compiled('slow', `SELECT sleep(0.2) + count() FROM ${d}.jobs WHERE service = {service:String}`, { params: ['service'] }),
    compiled('backlog', `SELECT count() FROM ${d}.jobs`),
    compiled('pressure', `SELECT max(n) FROM ${d}.jobs WHERE service = {service:String}`, {
      params: ['service'],
      metricType: 'Value',
      clampMin: 0,
      clampMax: 100,
    }),
  ];
  t = await makeApp({ queries, clickhouse: db.handle, clock, env: { DFE_KEDA_SHIM_CACHE_MAX_KEYS: '3' } });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

async function setKnob(v: string | null, fail = 0): Promise<void> {
  await exec(`TRUNCATE TABLE \`${db.database}\`.knob`);
  await db.handle.client.insert({ table: `${db.database}.knob`, values: [{ v, fail }], format: 'JSONEachRow' });
}

describe('fresh answers', () => {
  it('answers the value computed by SQL, column by name, with bound params', async () => {
    expect(await get(t.app, '/q/jobs?service=a')).toMatchObject({ status: 200, body: { value: 3.5, source: 'fresh', age_seconds: 0 } });
    expect((await get(t.app, '/q/jobs?service=b&unrelated=x')).body).toMatchObject({ value: 40, source: 'fresh' });
  });
  it('serves the KEDA paths from the backlog and pressure queries', async () => {
    expect((await get(t.app, '/keda/hunt-backlog')).body).toEqual({ value: 4, source: 'fresh', age_seconds: 0 });
    expect((await get(t.app, '/keda/pressure?service=c&hold=70')).body).toEqual({ value: 100, source: 'fresh', age_seconds: 0 });
  });
  it('clamps to the band', async () => {
    expect((await get(t.app, '/q/clamped')).body).toMatchObject({ value: 50, source: 'fresh' });
  });
  it('answers a successful 0 for no row', async () => {
    expect((await get(t.app, '/q/empty')).body).toMatchObject({ value: 0, source: 'fresh' });
  });
});

describe('client mistakes never reach ClickHouse', () => {
  it('404 for an unknown query, 400 for missing/invalid params and a non-numeric hold', async () => {
    const before = started();
    const unknown = await get(t.app, '/q/nope?service=a');
    expect(unknown).toMatchObject({ status: 404, body: { query: 'nope' } });
    expect(typeof unknown.body.error).toBe('string');
    for (const url of ['/q/jobs', '/q/jobs?service=', "/q/jobs?service=a'--", '/q/jobs?service=a%20b', '/keda/pressure?service=a&hold=abc', '/keda/pressure']) {
      const res = await get(t.app, url);
      expect({ url, status: res.status, query: res.body.query }).toEqual({ url, status: 400, query: url.includes('pressure') ? 'pressure' : 'jobs' });
      expect(typeof res.body.error).toBe('string');
    }
    expect(started()).toBe(before);
    const metrics = (await get(t.app, '/metrics')).body.text as string;
    expect(metrics).not.toContain('nope');
    expect(metrics).toMatch(/dfe_keda_shim_requests_total\{query="jobs",source="bad_request"\} 4/);
  });
});

describe('bad results and failures hold the last good value', () => {
  it('NULL replaces the cache with 0; non-numeric and errors hold; staleness gives 503', async () => {
    await setKnob('5');
    expect((await get(t.app, '/q/knob')).body).toEqual({ value: 5, source: 'fresh', age_seconds: 0 });
    await setKnob('abc');
    clock.advance(2_000);
    expect((await get(t.app, '/q/knob')).body).toEqual({ value: 5, source: 'last_good', age_seconds: 2 });
    await setKnob(null);
    expect((await get(t.app, '/q/knob')).body).toMatchObject({ value: 0, source: 'fresh' });
    await setKnob('7', 1);
    clock.advance(1_000);
    expect((await get(t.app, '/q/knob')).body).toEqual({ value: 0, source: 'last_good', age_seconds: 1 });
    clock.advance(60_000);
    const stale = await get(t.app, '/q/knob');
    expect(stale).toMatchObject({ status: 503, body: { query: 'knob' } });
    const status = (await get(t.app, '/status')).body as { queries: Record<string, { last_error: { reason: string; message: string } }> };
    expect(status.queries.knob?.last_error.reason).toBe('error');
    expect(status.queries.knob?.last_error.message).toContain('knob says fail');
    const metrics = (await get(t.app, '/metrics')).body.text as string;
    expect(metrics).toMatch(/dfe_keda_shim_failsafe_answers_total\{query="knob",reason="bad_result"\} 1/);
    expect(metrics).toMatch(/dfe_keda_shim_failsafe_answers_total\{query="knob",reason="error"\} 2/);
    expect(metrics).toMatch(/dfe_keda_shim_requests_total\{query="knob",source="stale"\} 1/);
  });

  it('a Value query holds the target given as hold, else last-good, cold start cold_hold', async () => {
    await setKnob('1', 1);
    expect((await get(t.app, '/q/valueq?service=s&hold=70.12345')).body).toEqual({ value: 70.123, source: 'hold', age_seconds: 0 });
    expect((await get(t.app, '/q/valueq?service=s')).body).toEqual({ value: 0, source: 'cold_hold', age_seconds: 0 });
    await setKnob('12.5');
    expect((await get(t.app, '/q/valueq?service=s&hold=70')).body).toMatchObject({ value: 12.5, source: 'fresh' });
    await setKnob('12.5', 1);
    expect((await get(t.app, '/q/valueq?service=s&hold=70')).body).toMatchObject({ value: 70, source: 'hold' });
    expect((await get(t.app, '/q/valueq?service=s')).body).toMatchObject({ value: 12.5, source: 'last_good' });
  });
});

describe('a failure does not poison the next answer (embedded engine)', () => {
  it('answers fresh right after another query failed mid-output', async () => {
    await setKnob('1', 1);
    expect((await get(t.app, '/q/knob')).body.source).not.toBe('fresh');
    expect((await get(t.app, '/q/jobs?service=c')).body).toMatchObject({ value: 100, source: 'fresh' });
  });
});

describe('cache policy', () => {
  it('fresh_for_seconds reuses a young value without asking ClickHouse', async () => {
    const before = started();
    expect((await get(t.app, '/q/young')).body).toMatchObject({ value: 4, source: 'fresh', age_seconds: 0 });
    clock.advance(10_000);
    expect((await get(t.app, '/q/young')).body).toMatchObject({ value: 4, source: 'fresh', age_seconds: 10 });
    expect(started()).toBe(before + 1);
    clock.advance(20_000);
    await get(t.app, '/q/young');
    expect(started()).toBe(before + 2);
  });

  it('100 concurrent identical requests run one ClickHouse query', async () => {
    const before = started();
    const answers = await Promise.all(Array.from({ length: 100 }, () => get(t.app, '/q/slow?service=a&noise=' + Math.random())));
    expect(started()).toBe(before + 1);
    expect(new Set(answers.map((a) => JSON.stringify(a.body)))).toEqual(new Set([JSON.stringify({ value: 2, source: 'fresh', age_seconds: 0 })]));
  });

  it('bounds the cache (LRU) however many distinct params arrive', async () => {
    for (const s of ['a', 'b', 'c', 'd', 'e', 'f']) await get(t.app, `/q/jobs?service=${s}`);
    expect(t.app.shim.executor.cacheSize).toBe(3);
    expect((await get(t.app, '/metrics')).body.text).toMatch(/dfe_keda_shim_cache_entries 3\b/);
  });
});

describe('deadline on the real engine', () => {
  it('answers cold_hold at the deadline; the query lands later and refreshes the cache', async () => {
    const late = compiled('late', 'SELECT sleep(0.4) + 6', { deadlineMs: 50, coldHold: 1 });
    t.catalogue.apply([...t.catalogue.current().queries.values(), late]);
    const before = started();
    expect((await get(t.app, '/q/late')).body).toEqual({ value: 1, source: 'cold_hold', age_seconds: 0 });
    // Still running: a second request joins that flight instead of starting another.
    expect((await get(t.app, '/q/late')).body).toMatchObject({ source: 'cold_hold' });
    expect(started()).toBe(before + 1);
    await vi.waitFor(async () => {
      const metrics = (await get(t.app, '/metrics')).body.text as string;
      expect(metrics).toMatch(/clickhouse_query_duration_seconds_count\{query="late",outcome="success"\} 1/);
    });
    expect((await get(t.app, '/q/late')).body).toMatchObject({ value: 6, source: 'last_good' });
    expect((await get(t.app, '/metrics')).body.text).toMatch(/dfe_keda_shim_failsafe_answers_total\{query="late",reason="deadline"\} 3/);
  });
});

describe('catalogue reloads', () => {
  it('drops cache entries of changed queries and metric series of removed ones', async () => {
    await get(t.app, '/q/clamped');
    const queries = [...t.catalogue.current().queries.values()];
    const changed = queries.map((q) => (q.name === 'clamped' ? { ...q, clampMax: 10, fingerprint: 'clamped-v2' } : q)).filter((q) => q.name !== 'empty');
    t.catalogue.apply(changed);
    t.catalogue.reject(new Error('bad yaml'));
    expect((await get(t.app, '/q/clamped')).body).toMatchObject({ value: 10, source: 'fresh' });
    expect((await get(t.app, '/q/empty')).status).toBe(404);
    const metrics = (await get(t.app, '/metrics')).body.text as string;
    expect(metrics).not.toContain('query="empty"');
    expect(metrics).toMatch(/dfe_keda_shim_catalogue_reloads_total\{result="rejected"\} 1/);
    const labelValues = new Set([...metrics.matchAll(/query="([^"]*)"/g)].map((m) => m[1]));
    const names = new Set(t.catalogue.current().queries.keys());
    for (const v of labelValues) expect(names.has(v as string)).toBe(true);
  });
});

describe('a reload drops the cache of what it changed or removed', () => {
  it('a changed, or removed and re-added, query starts cold: the old definition’s last-good is never held', async () => {
    const v1 = compiled('swap', `SELECT throwIf(any(fail) = 1, 'knob says fail') AS f, toFloat64OrNull(any(v)) AS v FROM \`${db.database}\`.knob`, {
      resultField: 'v',
      coldHold: 1,
    });
    const v2 = { ...v1, clampMax: 2, fingerprint: 'swap-v2' };
    const others = () => [...t.catalogue.current().queries.values()].filter((q) => q.name !== 'swap');
    t.catalogue.apply([...others(), v1]);
    await setKnob('5');
    expect((await get(t.app, '/q/swap')).body).toMatchObject({ value: 5, source: 'fresh' });
    await setKnob('5', 1);
    expect((await get(t.app, '/q/swap')).body).toMatchObject({ value: 5, source: 'last_good' });
    t.catalogue.apply([...others(), v2]);
    expect((await get(t.app, '/q/swap')).body).toEqual({ value: 1, source: 'cold_hold', age_seconds: 0 });
    await setKnob('5');
    expect((await get(t.app, '/q/swap')).body).toMatchObject({ value: 2, source: 'fresh' });
    t.catalogue.apply(others());
    t.catalogue.apply([...others(), v2]);
    await setKnob('5', 1);
    expect((await get(t.app, '/q/swap')).body).toEqual({ value: 1, source: 'cold_hold', age_seconds: 0 });
  });
});

describe('a reload while an answer is in flight', () => {
  it('leaves no metric series of a query it removed, even when that answer lands after', async () => {
    const goner = compiled('goner', `SELECT sleep(0.3) + count() FROM \`${db.database}\`.jobs`);
    t.catalogue.apply([...t.catalogue.current().queries.values(), goner]);
    const before = started();
    const answer = get(t.app, '/q/goner');
    await vi.waitFor(() => expect(started()).toBe(before + 1));
    t.catalogue.apply([...t.catalogue.current().queries.values()].filter((q) => q.name !== 'goner'));
    // The request that began on the old catalogue is still answered…
    expect((await answer).body).toMatchObject({ value: 4, source: 'fresh' });
    // …but its query is gone, and so are its series (requests, age, duration).
    expect((await get(t.app, '/metrics')).body.text).not.toContain('query="goner"');
  });
});

describe('operator endpoints', () => {
  it('livez, readyz (not before listening), status without credentials', async () => {
    expect((await get(t.app, '/livez')).status).toBe(200);
    expect((await get(t.app, '/readyz')).status).toBe(503);
    const status = (await get(t.app, '/status')).body as Record<string, unknown>;
    expect(status).toMatchObject({ backend: 'embedded', catalogue: { builtin: 'test', override: null }, grpc: null });
    expect(status.queries).toHaveProperty('jobs.last_value');
    expect(JSON.stringify(status)).not.toMatch(/password/i);
  });
});
