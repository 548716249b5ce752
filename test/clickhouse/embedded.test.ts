import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClickHouseClient, ClickHouseHandle } from '../../src/clickhouse/client.js';
import { embeddedSessionPool, Gate, openEmbedded, statementSlots } from '../../src/clickhouse/embedded.js';
import { embeddedPathForThisProcess } from '../helpers/clickhouse.js';

/**
 * The embedded engine's side of the seam (src/clickhouse/embedded.ts), on the
 * real engine: each quirk it works around is shown first, then the workaround.
 * The gates own no test database; the pool's sessions get their own gates so
 * nothing here waits on another test's statements.
 */
let handle: ClickHouseHandle;
beforeAll(async () => {
  handle = await openEmbedded(embeddedPathForThisProcess());
});
afterAll(async () => handle?.close());

async function text(client: ClickHouseClient, query: string): Promise<string> {
  const rs = await client.query({ query, format: 'JSONCompact' });
  return rs.text();
}

async function maxThreads(client: ClickHouseClient): Promise<string> {
  const rs = await client.query({ query: "SELECT toString(getSetting('max_threads')) AS v", format: 'JSONEachRow' });
  const [row] = await rs.json<{ v: string }>();
  return row?.v ?? '';
}

/** A query that writes rows, then fails (one row per block, so rows go out before the error). */
async function failAfterRows(client: ClickHouseClient): Promise<void> {
  const failed = await client
    .query({ query: 'SELECT number AS value, throwIf(number = 5) FROM numbers(10)', format: 'JSONCompact', clickhouse_settings: { max_block_size: '1' } })
    .then((rs) => rs.text())
    .then(
      () => false,
      () => true,
    );
  expect(failed, 'the query fails').toBe(true);
}

describe('after a failed query (quirk 6)', () => {
  it('its leftover output is prepended to the next result on the connection', async () => {
    const own = await openEmbedded(embeddedPathForThisProcess());
    try {
      await failAfterRows(own.client);
      const next = await text(own.client, 'SELECT 7 AS value');
      expect(() => JSON.parse(next), 'a prefixed answer is not one JSON document').toThrow();
      expect(next, 'the failed query’s header leads the answer').toContain('throwIf');
    } finally {
      await own.close();
    }
  });

  it('afterQueryError drains it: the next result is the next query’s alone', async () => {
    await failAfterRows(handle.client);
    await handle.afterQueryError(handle.client, false);
    expect(JSON.parse(await text(handle.client, 'SELECT 7 AS value'))).toMatchObject({ data: [[7]], rows: 1 });
  });
});

describe('statement sessions (quirks 2 and 3)', () => {
  /** A pool of its own for one test, closed whatever the test does. */
  async function withPool(test: (sessions: ReturnType<typeof embeddedSessionPool>) => Promise<void>): Promise<void> {
    const sessions = embeddedSessionPool(() => openEmbedded(embeddedPathForThisProcess()), new Gate(2), new Gate(1));
    try {
      await test(sessions);
    } finally {
      await sessions.close();
    }
  }

  it('a setting sent with one query stays set on that session', () =>
    withPool(async (sessions) => {
      const session = await sessions.acquire();
      const before = await maxThreads(session.client);
      await session.client.command({ query: 'SELECT 1', clickhouse_settings: { max_threads: 3 } });
      expect(await maxThreads(session.client)).toBe('3');
      expect(before).not.toBe('3');
    }));

  it('release puts the run’s settings back to DEFAULT and the session is reused', () =>
    withPool(async (sessions) => {
      const session = await sessions.acquire();
      const before = await maxThreads(session.client);
      await session.client.command({ query: 'SELECT 1', clickhouse_settings: { max_threads: 3 } });
      await sessions.release(session, ['max_threads']);
      const again = await sessions.acquire();
      expect(again.client, 'the idle session is reused').toBe(session.client);
      expect(await maxThreads(again.client)).toBe(before);
    }));

  it('concurrent runs get sessions of their own', () =>
    withPool(async (sessions) => {
      const [a, b] = await Promise.all([sessions.acquire(), sessions.acquire()]);
      expect(a?.client).not.toBe(b?.client);
    }));

  it('a session that cannot be reset is dropped, never reused', () =>
    withPool(async (sessions) => {
      const session = await sessions.acquire();
      // A reset the engine refuses (hunt keys are validated identifiers, so here a syntax error).
      await sessions.release(session, ['1 = 1; SET']);
      const next = await sessions.acquire();
      expect(next.client).not.toBe(session.client);
    }));
});

describe('the gates (quirks 4 and 5)', () => {
  it('statement slots leave two libuv threads for coordination', () => {
    expect(statementSlots({})).toBe(2);
    expect(statementSlots({ UV_THREADPOOL_SIZE: '16' })).toBe(14);
    expect(statementSlots({ UV_THREADPOOL_SIZE: '2' })).toBe(1);
    expect(statementSlots({ UV_THREADPOOL_SIZE: 'lots' })).toBe(2);
  });

  it('a gate runs at most `slots` at once and lets waiters in first come, first served', async () => {
    const gate = new Gate(2);
    const release: Array<() => void> = [];
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const job = (name: string) =>
      gate.run(async () => {
        order.push(name);
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => release.push(resolve));
        running -= 1;
      });
    const jobs = ['a', 'b', 'c', 'd'].map(job);
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['a', 'b']);
    for (let turn = 0; turn < 8; turn += 1) {
      release.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(jobs);
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    expect(most).toBe(2);
  });
});
