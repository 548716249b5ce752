import { capturingLogger } from '../helpers/logger.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { MAX_SERVABLE } from '../../src/servable.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * The answer bodies byte for byte, for every source: the query routes
 * serialise through a compiled response schema (docs/performance.md), which
 * must write exactly what JSON.stringify of the same object writes — same keys,
 * same order, same number text — and leave error bodies and headers as they were.
 */
let db: TestDatabase;
let t: AppUnderTest;
const clock = new ManualClock(5_000_000);
const exec = (sql: string) => db.handle.client.command({ query: sql });

beforeAll(async () => {
  db = await openTestDatabase('shim_bodies');
  const d = `\`${db.database}\``;
  await exec(`CREATE TABLE ${d}.knob (v Float64, fail UInt8) ENGINE = Memory`);
  const knob = `SELECT throwIf(any(fail) = 1, 'knob says fail') AS f, any(v) AS v FROM ${d}.knob`;
  const queries = [
    compiled('plain', 'SELECT 3.5 AS value'),
    compiled('tiny', 'SELECT 0.0014 AS value'),
    // The largest value KEDA can carry (docs/failsafe.md#servable-range): 16 digits, past 2^53.
    compiled('huge', `SELECT toFloat64(${MAX_SERVABLE}) AS value`),
    compiled('young', 'SELECT 7 AS value', { freshForSeconds: 30 }),
    compiled('knob', knob, { resultField: 'v', coldHold: 2.5, maxStaleSeconds: 60 }),
    compiled('valueq', `${knob} WHERE {service:String} != ''`, { params: ['service'], resultField: 'v', metricType: 'Value' }),
    compiled('backlog', 'SELECT 11 AS value'),
    compiled('pressure', 'SELECT 0.5 AS value', { metricType: 'Value' }),
  ];
  t = await makeApp({ queries, clickhouse: db.handle, clock });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

async function setKnob(v: number, fail: number): Promise<void> {
  await exec(`TRUNCATE TABLE \`${db.database}\`.knob`);
  await db.handle.client.insert({ table: `${db.database}.knob`, values: [{ v, fail }], format: 'JSONEachRow' });
}

async function raw(url: string) {
  const res = await t.app.inject({ method: 'GET', url });
  return { status: res.statusCode, body: res.body, type: res.headers['content-type'], cache: res.headers['cache-control'] };
}

const answer = (value: number, source: string, age_seconds: number) => JSON.stringify({ value, source, age_seconds });

describe('answer bodies are byte-identical to JSON.stringify, for every source', () => {
  it('fresh, reused fresh with an age, and the KEDA paths', async () => {
    for (const [url, body] of [
      ['/q/plain', answer(3.5, 'fresh', 0)],
      ['/q/tiny', answer(0.001, 'fresh', 0)],
      ['/q/huge', answer(MAX_SERVABLE, 'fresh', 0)],
      ['/q/young', answer(7, 'fresh', 0)],
      ['/keda/hunt-backlog', answer(11, 'fresh', 0)],
      ['/keda/pressure?hold=3', answer(0.5, 'fresh', 0)],
    ] as const) {
      expect({ url, ...(await raw(url)) }).toEqual({ url, status: 200, body, type: 'application/json; charset=utf-8', cache: 'no-store' });
    }
    expect(answer(MAX_SERVABLE, 'fresh', 0)).toContain(':9223372036854774,');
    clock.advance(1_234);
    expect((await raw('/q/young')).body).toBe(answer(7, 'fresh', 1.234));
  });

  it('last_good, cold_hold, hold, and the 503 of a stale value', async () => {
    await setKnob(1, 1);
    expect(await raw('/q/knob')).toMatchObject({ status: 200, body: answer(2.5, 'cold_hold', 0), cache: 'no-store' });
    expect((await raw('/q/valueq?service=s&hold=70.12345')).body).toBe(answer(70.123, 'hold', 0));
    await setKnob(41.25, 0);
    expect((await raw('/q/knob')).body).toBe(answer(41.25, 'fresh', 0));
    await setKnob(1, 1);
    clock.advance(2_500);
    expect((await raw('/q/knob')).body).toBe(answer(41.25, 'last_good', 2.5));
    clock.advance(60_000);
    const stale = await raw('/q/knob');
    expect(stale.status).toBe(503);
    const parsed = JSON.parse(stale.body) as { error: string; query: string };
    expect(stale.body).toBe(JSON.stringify({ error: parsed.error, query: 'knob' }));
    expect(parsed.error).toContain('62.5 s old');
  });

  it('400 and 404 bodies keep their shape', async () => {
    expect(await raw('/q/valueq')).toMatchObject({ status: 400, body: JSON.stringify({ error: 'missing required parameter service', query: 'valueq' }) });
    expect(await raw('/q/nope')).toMatchObject({ status: 404, body: JSON.stringify({ error: 'unknown query "nope"', query: 'nope' }) });
  });

  it('requests and served age reach /metrics at scrape time', async () => {
    const metrics = (await raw('/metrics')).body;
    expect(metrics).toMatch(/dfe_keda_shim_requests_total\{query="plain",source="fresh"\} 1\n/);
    expect(metrics).toMatch(/dfe_keda_shim_requests_total\{query="young",source="fresh"\} 2\n/);
    expect(metrics).toMatch(/dfe_keda_shim_requests_total\{query="valueq",source="bad_request"\} 1\n/);
    expect(metrics).toMatch(/dfe_keda_shim_served_value_age_seconds\{query="young"\} 1.234\n/);
    await raw('/q/plain');
    // Counts since the last scrape are added, not lost or counted twice.
    expect((await raw('/metrics')).body).toMatch(/dfe_keda_shim_requests_total\{query="plain",source="fresh"\} 2\n/);
  });
});

describe('request loggers are made on first use', () => {
  it('a line logged from a request still carries its request id', async () => {
    const { logger, lines } = capturingLogger();
    logger.level = 'debug'; // the per-answer "answered" line is logged from the request, at debug
    const app = await makeApp({ queries: [compiled('plain', 'SELECT 1')], clickhouse: db.handle, logger });
    try {
      for (let i = 0; i < 2; i++) expect((await app.app.inject({ method: 'GET', url: '/q/plain' })).statusCode).toBe(200);
      const answered = lines.filter((l) => l.msg === 'answered');
      expect(answered).toHaveLength(2);
      for (const line of answered) expect(line).toMatchObject({ reqId: expect.any(String) as unknown, level: 20, path: '/q/plain', status: 200 });
      expect(answered[0]?.reqId).not.toBe(answered[1]?.reqId);
    } finally {
      await app.app.close();
    }
  });
});
