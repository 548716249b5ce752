import { capturingLogger } from '../helpers/logger.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * Failures are logged with query, params, reason and what was held — at most
 * once per key per minute (ManualClock) — and a Value query without `hold`
 * warns once. Request secrets (api_key) never reach the log.
 */
let db: TestDatabase;
let t: AppUnderTest;
const clock = new ManualClock(0);
const { logger, lines } = capturingLogger();

beforeAll(async () => {
  db = await openTestDatabase('shim_logs');
  await db.handle.client.command({ query: `CREATE TABLE \`${db.database}\`.knob (v Float64, fail UInt8) ENGINE = Memory` });
  const queries = [
    compiled('broken', "SELECT throwIf({service:String} != '', 'always broken')", { params: ['service'], coldHold: 2 }),
    compiled('vknob', `SELECT throwIf(any(fail) = 1, 'knob says fail') AS f, any(v) AS v FROM \`${db.database}\`.knob WHERE {service:String} != ''`, {
      params: ['service'],
      resultField: 'v',
      metricType: 'Value',
    }),
    compiled('stalek', `SELECT throwIf(any(fail) = 1, 'knob says fail') AS f, any(v) AS v FROM \`${db.database}\`.knob`, {
      resultField: 'v',
      maxStaleSeconds: 10,
    }),
  ];
  t = await makeApp({ queries, clickhouse: db.handle, clock, logger });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

const failureLines = () => lines.filter((l) => l.msg === 'query failed; answered from the fail-safe path');

describe('failure logging', () => {
  it('logs once per key per minute with query, params, reason and the held answer', async () => {
    for (let i = 0; i < 3; i++) expect((await get(t.app, '/q/broken?service=a&api_key=SECRET-1')).body).toMatchObject({ source: 'cold_hold', value: 2 });
    expect(failureLines()).toHaveLength(1);
    expect(failureLines()[0]).toMatchObject({ query: 'broken', params: { service: 'a' }, reason: 'error', held: { source: 'cold_hold', value: 2 } });
    expect(String(failureLines()[0]?.error)).toContain('always broken');
    await get(t.app, '/q/broken?service=b');
    expect(failureLines()).toHaveLength(2);
    clock.advance(59_000);
    await get(t.app, '/q/broken?service=a');
    expect(failureLines()).toHaveLength(2);
    clock.advance(1_000);
    await get(t.app, '/q/broken?service=a');
    expect(failureLines()).toHaveLength(3);
    expect(JSON.stringify(lines)).not.toContain('SECRET-1');
    // Every failure is counted, logged or not.
    expect((await get(t.app, '/metrics')).body.text).toMatch(/dfe_keda_shim_failsafe_answers_total\{query="broken",reason="error"\} 6/);
  });

  it('warns once per query when a Value query falls back to last-good for want of hold', async () => {
    const warnings = () => lines.filter((l) => String(l.msg).includes('pass hold=<trigger target>'));
    const knob = async (v: number, fail: number) => {
      await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.knob` });
      await db.handle.client.insert({ table: `${db.database}.knob`, values: [{ v, fail }], format: 'JSONEachRow' });
    };
    await knob(1, 1);
    expect((await get(t.app, '/q/vknob?service=a')).body.source).toBe('cold_hold');
    expect(warnings()).toHaveLength(0); // nothing held yet, nothing to warn about
    await knob(30, 0);
    expect((await get(t.app, '/q/vknob?service=a')).body).toMatchObject({ value: 30, source: 'fresh' });
    await knob(30, 1);
    for (const service of ['a', 'a', 'b', 'a']) await get(t.app, `/q/vknob?service=${service}`);
    expect((await get(t.app, '/q/vknob?service=a')).body).toMatchObject({ value: 30, source: 'last_good' });
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ query: 'vknob', level: 40 });
    expect((await get(t.app, '/q/vknob?service=a&hold=50')).body).toMatchObject({ value: 50, source: 'hold' });
  });

  it('a 503 for a too-old last-good value is logged like any failure: once per key per minute, not per request', async () => {
    await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.knob` });
    await db.handle.client.insert({ table: `${db.database}.knob`, values: [{ v: 4, fail: 0 }], format: 'JSONEachRow' });
    expect((await get(t.app, '/q/stalek')).body).toMatchObject({ value: 4, source: 'fresh' });
    await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.knob` });
    await db.handle.client.insert({ table: `${db.database}.knob`, values: [{ v: 4, fail: 1 }], format: 'JSONEachRow' });
    clock.advance(11_000);
    const before = lines.length;
    for (let i = 0; i < 3; i++) expect((await get(t.app, '/q/stalek')).status).toBe(503);
    const added = lines.slice(before);
    expect(added.map((l) => l.msg)).toEqual(['query failed; answered from the fail-safe path']);
    expect(added[0]).toMatchObject({ query: 'stalek', held: { source: 'stale' } });
  });
});
