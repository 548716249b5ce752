import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  blackHoleServer,
  garbageServer,
  http500Server,
  rawGarbageServer,
  refusedPort,
  resetServer,
  slowServer,
  type FaultEndpoint,
} from '../helpers/faults.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { needs } from '../helpers/requirement.js';

/**
 * The injectors themselves: each one makes @clickhouse/client fail (never hand
 * back a value), over a real socket. And the real 18.16 server helper starts,
 * dies, and comes back on the same port with its data.
 */
const REQUEST_TIMEOUT_MS = 400;

function clientFor(url: string): ClickHouseClient {
  return createClient({ url, request_timeout: REQUEST_TIMEOUT_MS, log: { level: ClickHouseLogLevel.OFF } });
}

async function outcome(url: string): Promise<'value' | 'failed'> {
  const client = clientFor(url);
  try {
    const rs = await client.query({ query: 'SELECT 42 AS value', format: 'JSONEachRow' });
    const rows = await rs.json<{ value: unknown }>();
    return typeof rows[0]?.value === 'number' ? 'value' : 'failed';
  } catch {
    return 'failed';
  } finally {
    await client.close();
  }
}

describe('fault injectors', () => {
  const cases: Array<[string, () => Promise<FaultEndpoint>, 'none' | 'some']> = [
    ['refused port', refusedPort, 'none'],
    ['black hole', blackHoleServer, 'some'],
    ['slow headers (past the timeout)', () => slowServer({ delayMs: REQUEST_TIMEOUT_MS * 3 }), 'some'],
    ['slow body (past the timeout)', () => slowServer({ delayMs: REQUEST_TIMEOUT_MS * 3, stall: 'body' }), 'some'],
    ['HTTP 500', http500Server, 'some'],
    ['html body', () => garbageServer('html'), 'some'],
    ['truncated JSON', () => garbageServer('truncated-json'), 'some'],
    ['short body', () => garbageServer('short-body'), 'some'],
    ['JSON of the wrong shape', () => garbageServer('wrong-shape'), 'some'],
    ['raw non-HTTP bytes', rawGarbageServer, 'some'],
    ['connection reset', resetServer, 'some'],
  ];

  it.each(cases)('%s: the client fails, never gets a value', async (_name, make, reached) => {
    const fault = await make();
    try {
      expect(await outcome(fault.url)).toBe('failed');
      if (reached === 'some') expect(fault.hits()).toBeGreaterThanOrEqual(1);
      else expect(fault.hits()).toBe(0);
    } finally {
      await fault.close();
    }
  });

  it('a slow server does answer its JSON once the delay has passed (it is late, not broken)', async () => {
    const fault = await slowServer({ delayMs: 50 });
    try {
      const res = await fetch(fault.url, { method: 'POST', body: 'SELECT 1' });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('{"value":0}\n');
    } finally {
      await fault.close();
    }
  });
});

const server = clickHouseServerAvailability();

needs(server.kind === 'missing' ? server.reason : undefined).describe('real clickhouse-server 18.16 process', () => {
  let ch: ClickHouseServerProcess;
  let client: ClickHouseClient;

  beforeAll(async () => {
    ch = await startClickHouseServer();
    client = createClient({ url: ch.url, request_timeout: 2_000, log: { level: ClickHouseLogLevel.OFF } });
  });
  afterAll(async () => {
    await client?.close();
    await ch?.dispose();
  });

  it('answers plain SQL through @clickhouse/client; 64-bit counts come back quoted', async () => {
    const rs = await client.query({ query: 'SELECT 42 AS v, count() AS n FROM (SELECT number FROM system.numbers LIMIT 1000)', format: 'JSONEachRow' });
    expect(await rs.json()).toEqual([{ v: 42, n: '1000' }]);
  });

  it('accepts max_execution_time but rejects query parameters (18.16 has none)', async () => {
    const ok = await client.query({ query: 'SELECT 1 AS v', format: 'JSONEachRow', clickhouse_settings: { max_execution_time: 2 } });
    expect(await ok.json()).toEqual([{ v: 1 }]);
    await expect(client.query({ query: 'SELECT {x:UInt8} AS v', query_params: { x: 1 }, format: 'JSONEachRow' })).rejects.toThrow(
      /Unknown setting param_x/,
    );
  });

  it('killed mid-run: an in-flight query fails, new ones are refused; restart serves the same data on the same port', async () => {
    await client.command({ query: 'CREATE TABLE IF NOT EXISTS default.kept (n UInt32) ENGINE = MergeTree ORDER BY n' });
    await client.command({ query: 'INSERT INTO default.kept VALUES (7)' });
    const inFlight = client.query({ query: 'SELECT sleep(2) AS v', format: 'JSONEachRow' }).then((rs) => rs.json());
    const settled = inFlight.then(
      () => 'answered',
      () => 'failed',
    );
    await new Promise((r) => setTimeout(r, 200));
    const port = ch.port;
    await ch.kill();
    expect(ch.state()).toBe('stopped');
    expect(await settled).toBe('failed');
    await expect(client.query({ query: 'SELECT 1', format: 'JSONEachRow' })).rejects.toThrow();

    await ch.restart();
    expect(ch.state()).toBe('running');
    expect(ch.port).toBe(port);
    const rs = await client.query({ query: 'SELECT sum(n) AS s FROM default.kept', format: 'JSONEachRow' });
    expect(await rs.json()).toEqual([{ s: '7' }]);
  });
});
