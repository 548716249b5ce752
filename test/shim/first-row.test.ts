import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fly } from '../../src/shim/flight.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled } from '../helpers/shim.js';

/**
 * Issue 9 item 7 on the real engine: only row 0 matters, so ClickHouse is
 * asked for no more (`SELECT * FROM (<sql>) LIMIT 1`). The wrap must keep
 * what the catalogue's SQL means: its ORDER BY, column names (result_field by
 * name), SETTINGS clause, CTEs, UNION ALL, a trailing `;` or `-- comment`.
 * And a query of ten million rows must come back as one row's worth of bytes.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await openTestDatabase('first_row');
});
afterAll(async () => db?.close());

async function run(sql: string, over: Parameters<typeof compiled>[2] = {}) {
  const report = await fly(db.handle.client, compiled('q', sql, { timeoutSeconds: 30, ...over }), {}, { afterError: db.handle.afterQueryError });
  return report;
}

describe('first row only, on the real engine', () => {
  it.each([
    ['ORDER BY DESC of ten million rows', 'SELECT number AS value FROM numbers(10000000) ORDER BY number DESC', 9_999_999],
    ['a UNION ALL', 'SELECT 3 AS value UNION ALL SELECT 4', 3],
    ['a SETTINGS clause', 'SELECT count() AS value FROM numbers(100) SETTINGS max_threads = 1', 100],
    ['a CTE', 'WITH t AS (SELECT number FROM numbers(50)) SELECT count() AS value FROM t', 50],
    ['a trailing semicolon', 'SELECT 8 AS value;', 8],
    ['a trailing comment', 'SELECT 9 AS value -- the answer', 9],
    ['GROUP BY with ORDER BY', 'SELECT number % 7 AS k, count() AS c FROM numbers(100000) GROUP BY k ORDER BY c ASC, k DESC', 6],
  ])('%s', async (_name, sql, expected) => {
    const report = await run(sql);
    expect(report.outcome).toEqual({ kind: 'ok', value: expected });
  });

  it('keeps column names: result_field by name, including an unaliased count()', async () => {
    expect((await run('SELECT 1 AS a, count() FROM numbers(12)', { resultField: 'count()' })).outcome).toEqual({ kind: 'ok', value: 12 });
    expect((await run('SELECT 1 AS a, 5 AS b', { resultField: 'b' })).outcome).toEqual({ kind: 'ok', value: 5 });
  });

  it('ten million rows come back as one row: the bytes read are a one-row document', async () => {
    const report = await run('SELECT number AS value FROM numbers(10000000)');
    expect(report.outcome).toEqual({ kind: 'ok', value: 0 });
    expect(report.bytesRead).toBeGreaterThan(0);
    expect(report.bytesRead).toBeLessThan(2_048);
  });

  it('no row is still a successful 0', async () => {
    expect((await run('SELECT number AS value FROM numbers(10) WHERE number > 100')).outcome).toEqual({ kind: 'ok', value: 0 });
  });
});
