import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMISSION_DEFAULTS } from '../../src/config/schema.js';
import { createOtelGaugeTable, insertGaugePoints } from '../../src/pressure/otel-table.js';
import { PRESSURE_METRIC } from '../../src/pressure/rule.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { stallingProxy } from '../helpers/faults.js';
import { startEngineFront, type EngineFront } from '../../src/clickhouse/http-front.js';
import { startChaosShim, type ChaosShim } from './harness.js';

/**
 * Admission keeps the stall isolation (docs/failsafe.md#admission), over real
 * sockets: the real shim on its server path talks to a proxy that stalls every
 * query carrying a marker (200 headers, half a body, silence) and forwards the
 * rest to the real engine (the embedded one behind an HTTP front). 100 stalled
 * keys hold at most their query's share of slots and wait or shed on their own;
 * healthy pressure keys polled at the same moment all answer fresh. The healthy
 * query's deadline is far past any load here (answers are under test, not speed).
 */
const MARKER = 'stall_marker';
const STALLED = 100;
const HEALTHY = 200;
const PER_QUERY = ADMISSION_DEFAULTS.server.maxInflightPerQuery;

let db: TestDatabase;
let front: EngineFront;
let proxy: Awaited<ReturnType<typeof stallingProxy>>;
let chaos: ChaosShim;
const agent = new Agent({ connections: 512, keepAliveTimeout: 4_000 });

async function getJson(url: string): Promise<{ status: number; body: { value?: number; source?: string } }> {
  const res = await request(url, { dispatcher: agent, headersTimeout: 30_000, bodyTimeout: 30_000 });
  return { status: res.statusCode, body: (await res.body.json()) as { value?: number; source?: string } };
}

beforeAll(async () => {
  db = await openTestDatabase('stalled_burst');
  await createOtelGaugeTable(db.handle.client, db.database);
  const nowNs = BigInt(Date.now()) * 1_000_000n;
  await insertGaugePoints(
    db.handle.client,
    db.database,
    Array.from({ length: HEALTHY }, (_, i) => ({ serviceName: `svc-${i}`, metricName: PRESSURE_METRIC, value: i % 100, timeUnixNs: nowNs })),
  );
  front = await startEngineFront(db.handle);
  proxy = await stallingProxy(front.url, MARKER);
  chaos = await startChaosShim(
    `queries:
  pressure:
    database: ${db.database}
    deadline_ms: 60000
    timeout_seconds: 120
  stalled_keys:
    params: [k]
    sql: "SELECT length({k:String}) AS ${MARKER}"
    deadline_ms: 300
    timeout_seconds: 5
    cold_hold: 0
`,
    { url: proxy.url },
  );
});

afterAll(async () => {
  await chaos?.close();
  await proxy?.close();
  await front?.close();
  await db?.close();
  await agent.close();
});

describe(`${STALLED} stalled keys and ${HEALTHY} healthy keys at once`, () => {
  it('every healthy key answers fresh; the stalled query holds at most its share and sheds only its own keys', async () => {
    const stalledBefore = proxy.stalled();
    const stalled = Array.from({ length: STALLED }, (_, i) => getJson(`${chaos.url}/q/stalled_keys?k=s${i}`));
    const healthy = Array.from({ length: HEALTHY }, (_, i) => getJson(`${chaos.url}/keda/pressure?service=svc-${i}&hold=70`));
    const healthyAnswers = await Promise.all(healthy);

    expect(healthyAnswers.filter((a) => a.status !== 200 || a.body.source !== 'fresh')).toEqual([]);
    expect(healthyAnswers.map((a) => a.body.value)).toEqual(Array.from({ length: HEALTHY }, (_, i) => i % 100));
    const stalledAnswers = await Promise.all(stalled);
    expect(stalledAnswers.every((a) => a.status === 200 && a.body.source === 'cold_hold')).toBe(true);
    expect(proxy.stalled() - stalledBefore).toBe(PER_QUERY);
    const metrics = await (await fetch(`${chaos.url}/metrics`)).text();
    expect(metrics).toContain(`dfe_keda_shim_failsafe_answers_total{query="stalled_keys",reason="overload"} ${STALLED - PER_QUERY}`);
    expect(metrics).toContain(`dfe_keda_shim_failsafe_answers_total{query="stalled_keys",reason="deadline"} ${PER_QUERY}`);
    expect(metrics).toContain('dfe_keda_shim_failsafe_answers_total{query="pressure",reason="overload"} 0');
    // Healthy keys were batched: far fewer queries reached the engine than keys.
    expect(front.queries()).toBeLessThan(HEALTHY);
  });
});
