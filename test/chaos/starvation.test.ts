import { afterAll, beforeAll, expect, it } from 'vitest';
import { ADMISSION_DEFAULTS } from '../../src/config/schema.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { needs } from '../helpers/requirement.js';
import { stallingProxy } from '../helpers/faults.js';
import { agent, getJson, startChaosShim, type ChaosShim } from './harness.js';

/**
 * Issue 9 item 4 over real sockets: a REAL clickhouse-server behind a proxy
 * that stalls every query carrying a marker (200 headers, half a body,
 * silence) and forwards the rest. The real shim (production client config)
 * polls 100 stalled keys — first of one query, then of 100 queries — and a
 * healthy key must still answer FRESH: one key's fault must not starve
 * another. (Before: the client's 10-socket pool was shared, ten stalls froze
 * everything.) Asserts sources and counts, not timings.
 */
const server = clickHouseServerAvailability();

const MARKER = 'stall_marker';
/** The chaos shim runs on a server URL: the server defaults apply. */
const MAX_INFLIGHT_PER_QUERY = ADMISSION_DEFAULTS.server.maxInflightPerQuery;
const STALLED_QUERIES = 100;

needs(server.kind === 'missing' ? server.reason : undefined).describe('100 stalled keys and one healthy key', () => {
  let ch: ClickHouseServerProcess;
  let proxy: Awaited<ReturnType<typeof stallingProxy>>;
  let chaos: ChaosShim;
  let rows = 0;

  const addJob = async () => {
    const res = await fetch(`${ch.url}/?query=${encodeURIComponent('INSERT INTO default.jobs VALUES')}`, { method: 'POST', body: `(${rows + 1})` });
    expect(res.status).toBe(200);
    rows += 1;
    return rows;
  };

  beforeAll(async () => {
    ch = await startClickHouseServer();
    const created = await fetch(ch.url, { method: 'POST', body: 'CREATE TABLE default.jobs (n UInt32) ENGINE = MergeTree ORDER BY n' });
    expect(created.status).toBe(200);
    proxy = await stallingProxy(ch.url, MARKER);
    const stalledQueries = Array.from(
      { length: STALLED_QUERIES },
      (_, i) => `  stalled_${i}:\n    sql: "SELECT 0 AS ${MARKER}"\n    deadline_ms: 300\n    timeout_seconds: 5\n    cold_hold: 0\n`,
    ).join('');
    chaos = await startChaosShim(
      `queries:
  healthy:
    database: default
    sql: "SELECT count() AS value FROM __DB__.jobs"
    deadline_ms: 2000
    timeout_seconds: 5
    cold_hold: 0
  stalled_keys:
    params: [k]
    sql: "SELECT length({k:String}) AS ${MARKER}"
    deadline_ms: 300
    timeout_seconds: 5
    cold_hold: 0
${stalledQueries}`,
      { url: proxy.url },
    );
  });

  afterAll(async () => {
    await chaos?.close();
    await proxy?.close();
    await ch?.dispose();
    await agent.close();
  });

  async function healthyIsFresh(): Promise<void> {
    const expected = await addJob();
    const answer = await getJson(`${chaos.url}/q/healthy`);
    expect(answer).toEqual({ status: 200, body: { value: expected, source: 'fresh', age_seconds: 0 } });
  }

  it('100 stalled keys of one query: the healthy key answers fresh; the stalled query holds at most its share', async () => {
    await healthyIsFresh();
    const stalledBefore = proxy.stalled();
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => getJson(`${chaos.url}/q/stalled_keys?k=s${i}`)));
    expect(answers.every((a) => a.status === 200 && a.body.source === 'cold_hold' && a.body.value === 0)).toBe(true);
    await healthyIsFresh();
    // More stalls reached the proxy than the client's old pool (10) had sockets, and no more than the query's share.
    expect(proxy.stalled() - stalledBefore).toBe(MAX_INFLIGHT_PER_QUERY);
    // The rest waited in the admission queue until their deadline came near, then were answered as overload.
    const metrics = await (await fetch(`${chaos.url}/metrics`)).text();
    expect(metrics).toContain(`dfe_keda_shim_failsafe_answers_total{query="stalled_keys",reason="overload"} ${100 - MAX_INFLIGHT_PER_QUERY}`);
  });

  it('100 stalled queries, one key each: the healthy key still answers fresh', async () => {
    const stalledBefore = proxy.stalled();
    const answers = await Promise.all(Array.from({ length: STALLED_QUERIES }, (_, i) => getJson(`${chaos.url}/q/stalled_${i}`)));
    expect(answers.every((a) => a.status === 200 && a.body.source === 'cold_hold')).toBe(true);
    await healthyIsFresh();
    expect(proxy.stalled() - stalledBefore).toBe(STALLED_QUERIES);
  });
});
