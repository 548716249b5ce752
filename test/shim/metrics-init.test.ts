import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMISSION_OUTCOMES, FAILSAFE_REASONS, QUERY_OUTCOMES, REQUEST_SOURCES } from '../../src/shim/metrics.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * Counters exist before anything happens (the Prometheus instrumentation
 * guide): every catalogue query × fail-safe reason and every reload result is
 * exported at 0 from the first scrape, and a reload rebuilds the query set.
 */
let db: TestDatabase;
let t: AppUnderTest;

const scrape = async () => (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
const failsafe = (query: string, reason: string, n: number) => `dfe_keda_shim_failsafe_answers_total{query="${query}",reason="${reason}"} ${n}`;

beforeAll(async () => {
  db = await openTestDatabase('shim_metrics_init');
  t = await makeApp({ queries: [compiled('a', 'SELECT 1 AS value'), compiled('b', 'SELECT 2 AS value')], clickhouse: db.handle });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

describe('counters at 0 before any event', () => {
  it('every query × reason and both reload results, on the first scrape', async () => {
    const text = await scrape();
    for (const query of ['a', 'b']) for (const reason of FAILSAFE_REASONS) expect(text).toContain(failsafe(query, reason, 0));
    expect(text).toContain('dfe_keda_shim_catalogue_reloads_total{result="applied"} 0');
    expect(text).toContain('dfe_keda_shim_catalogue_reloads_total{result="rejected"} 0');
    expect(text).toContain('dfe_keda_shim_admission_queued 0');
    expect(text).toContain('# TYPE dfe_keda_shim_admission_wait_seconds histogram');
    expect(text).toContain('# TYPE dfe_keda_shim_batch_size histogram');
  });

  it('every query × source, × query outcome and × admission outcome, and its served age, on the first scrape', async () => {
    const text = await scrape();
    for (const query of ['a', 'b']) {
      for (const source of REQUEST_SOURCES) expect(text).toContain(`dfe_keda_shim_requests_total{query="${query}",source="${source}"} 0`);
      for (const outcome of QUERY_OUTCOMES) expect(text).toContain(`dfe_keda_shim_clickhouse_query_duration_seconds_count{query="${query}",outcome="${outcome}"} 0`);
      for (const outcome of ADMISSION_OUTCOMES) expect(text).toContain(`dfe_keda_shim_admission_wait_seconds_count{query="${query}",outcome="${outcome}"} 0`);
      expect(text).toContain(`dfe_keda_shim_served_value_age_seconds{query="${query}"} 0`);
    }
  });

  it('a reload adds the new query\'s series at 0 and drops the removed one\'s', async () => {
    t.catalogue.apply([compiled('b', 'SELECT 2 AS value'), compiled('c', 'SELECT 3 AS value')]);
    t.catalogue.reject(new Error('bad override'));
    const text = await scrape();
    for (const reason of FAILSAFE_REASONS) {
      expect(text).toContain(failsafe('c', reason, 0));
      expect(text).toContain(failsafe('b', reason, 0));
      expect(text).not.toContain(`query="a",reason="${reason}"`);
    }
    expect(text).toContain('dfe_keda_shim_catalogue_reloads_total{result="applied"} 1');
    expect(text).toContain('dfe_keda_shim_catalogue_reloads_total{result="rejected"} 1');
  });

  it('a reload keeps what a known query counted (its series are made once)', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/q/b' })).statusCode).toBe(200);
    t.catalogue.apply([compiled('b', 'SELECT 2 AS value'), compiled('c', 'SELECT 3 AS value')]);
    const text = await scrape();
    expect(text).toContain('dfe_keda_shim_requests_total{query="b",source="fresh"} 1');
    expect(text).toContain('dfe_keda_shim_clickhouse_query_duration_seconds_count{query="b",outcome="success"} 1');
  });
});
