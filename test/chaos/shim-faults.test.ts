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
import { openGoodClickHouse, type GoodClickHouse } from './good-clickhouse.js';
import { agent, poll, startChaosShim, SwitchableClickHouse, type Answer, type ChaosShim } from './harness.js';

/**
 * docs/failsafe.md under a steady poll load over a real socket: ClickHouse turns
 * into each fault injector, then back. Every answer is a 200, values go
 * fresh → last_good → fresh, and no answer is ever above the last good value
 * (a broken metric never scales up). Asserts sources and values, not timings.
 */
let good: GoodClickHouse;
let clickhouse: SwitchableClickHouse;
let chaos: ChaosShim;
let lastGood = 0;

const DEADLINE_MS = 300;

beforeAll(async () => {
  good = await openGoodClickHouse();
  console.info(`[chaos] healthy ClickHouse: ${good.description}`);
  clickhouse = await SwitchableClickHouse.open(good.target);
  chaos = await startChaosShim(
    `queries:
  jobs:
    database: ${good.database}
    sql: "SELECT count() AS value FROM __DB__.jobs"
    deadline_ms: ${DEADLINE_MS}
    timeout_seconds: 1
    cold_hold: 0
`,
    clickhouse,
  );
  lastGood = await good.addJob();
});

afterAll(async () => {
  await chaos?.close();
  await clickhouse?.close();
  await good?.close();
  await agent.close();
});

function expectAllOk(answers: readonly Answer[]): void {
  const bad = answers.filter((a) => a.status !== 200);
  expect(bad.slice(0, 3), `${bad.length} non-200 answers of ${answers.length}`).toEqual([]);
}

function neverAbove(answers: readonly Answer[], ceiling: number): void {
  const above = answers.filter((a) => typeof a.body.value !== 'number' || a.body.value > ceiling);
  expect(above.slice(0, 3), `answers above the last good value ${ceiling}`).toEqual([]);
}

/** Name, injector, and whether the shim's queries reach its socket (a refused port takes none). */
const FAULTS: Array<[string, () => Promise<FaultEndpoint>, 'reached' | 'refused']> = [
  ['refused port', refusedPort, 'refused'],
  ['black hole (accepts, never answers)', blackHoleServer, 'reached'],
  ['slow headers (past the abort)', () => slowServer({ delayMs: 3_000 }), 'reached'],
  ['slow body (past the abort)', () => slowServer({ delayMs: 3_000, stall: 'body' }), 'reached'],
  ['HTTP 500', http500Server, 'reached'],
  ['200 with an HTML body', () => garbageServer('html'), 'reached'],
  ['200 with truncated JSON', () => garbageServer('truncated-json'), 'reached'],
  ['200 with a body shorter than its Content-Length', () => garbageServer('short-body'), 'reached'],
  ['200 with JSON of the wrong shape', () => garbageServer('wrong-shape'), 'reached'],
  ['raw non-HTTP bytes', rawGarbageServer, 'reached'],
  ['connection reset', resetServer, 'reached'],
];

describe('ClickHouse faults under a steady poll load', () => {
  it.each(FAULTS)('%s: fresh → last_good → fresh, every answer 200, never above the last good', async (_name, makeFault, reach) => {
    const url = `${chaos.url}/q/jobs`;
    await clickhouse.use(good.target);
    const before = await poll(url, {
      concurrency: 4,
      durationMs: 5_000,
      maxRequests: 500,
      until: (a) => a.body.source === 'fresh' && a.body.value === lastGood,
    });
    expectAllOk(before);
    neverAbove(before, lastGood);
    expect(before.at(-1)?.body).toMatchObject({ value: lastGood, source: 'fresh' });

    const fault = await makeFault();
    try {
      await clickhouse.use(fault.url);
      const during = await poll(url, { concurrency: 4, durationMs: 800, maxRequests: 2_000 });
      expectAllOk(during);
      neverAbove(during, lastGood);
      // A request may still join a flight begun before the switch (fresh); the rest hold the value.
      expect(during.every((a) => a.body.value === lastGood && ['fresh', 'last_good'].includes(a.body.source ?? ''))).toBe(true);
      expect(during.some((a) => a.body.source === 'last_good')).toBe(true);
      if (reach === 'reached') expect(fault.hits()).toBeGreaterThan(0);
    } finally {
      await fault.close();
    }

    await clickhouse.use(good.target);
    const next = await good.addJob();
    const after = await poll(url, {
      concurrency: 4,
      durationMs: 5_000,
      maxRequests: 2_000,
      until: (a) => a.body.source === 'fresh' && a.body.value === next,
    });
    expectAllOk(after);
    neverAbove(after, next);
    expect(after.some((a) => a.body.source === 'fresh' && a.body.value === next)).toBe(true);
    lastGood = next;
  });
});
