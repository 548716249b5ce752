import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { blackHoleServer, garbageServer, http500Server, refusedPort, resetServer, slowServer, type FaultEndpoint } from '../helpers/faults.js';
import { openGoodClickHouse, type GoodClickHouse } from './good-clickhouse.js';
import { agent, openFdCount, pollTally, startChaosShim, SwitchableClickHouse, type ChaosShim } from './harness.js';
import { inCi, MissingInCiError } from '../helpers/requirement.js';

/**
 * A short soak: the shim under a paced poll load while ClickHouse cycles
 * between healthy and every kind of fault. Resources must stay bounded: open
 * file descriptors come back to within +10 of the baseline once the load
 * stops, RSS grows less than 100 MB. Generous margins on purpose: this is a
 * leak detector, not a speed test. DFE_CHAOS_SOAK_SECONDS shortens or
 * lengthens it (default 45).
 */
const SOAK_MS = Number(process.env.DFE_CHAOS_SOAK_SECONDS ?? 45) * 1000;
const SWITCH_EVERY_MS = 2_000;
const FD_MARGIN = 10;
const RSS_MARGIN_BYTES = 100 * 1024 * 1024;

let good: GoodClickHouse;
let clickhouse: SwitchableClickHouse;
let chaos: ChaosShim;
let faults: FaultEndpoint[] = [];
let value = 0;

beforeAll(async () => {
  good = await openGoodClickHouse();
  clickhouse = await SwitchableClickHouse.open(good.target);
  chaos = await startChaosShim(
    `queries:
  jobs:
    database: ${good.database}
    sql: "SELECT count() AS value FROM __DB__.jobs"
    deadline_ms: 250
    timeout_seconds: 1
  jobs_cached:
    database: ${good.database}
    sql: "SELECT count() AS value FROM __DB__.jobs"
    deadline_ms: 250
    timeout_seconds: 1
    fresh_for_seconds: 1
`,
    clickhouse,
  );
  for (let i = 0; i < 3; i++) value = await good.addJob();
  faults = await Promise.all([
    refusedPort(),
    blackHoleServer(),
    slowServer({ delayMs: 3_000 }),
    http500Server(),
    garbageServer('truncated-json'),
    resetServer(),
  ]);
});

afterAll(async () => {
  await chaos?.close();
  await clickhouse?.close();
  await Promise.all(faults.map((f) => f.close()));
  await good?.close();
  await agent.close();
});

describe('soak: ClickHouse cycling through faults under a steady poll load', () => {
  it(
    'answers only 200s, never above the good value, and keeps file descriptors and RSS bounded',
    async () => {
      const targets = [good.target, ...faults.map((f) => f.url)];
      const urls = [`${chaos.url}/q/jobs`, `${chaos.url}/q/jobs_cached`];
      /** Paced load for `durationMs` while ClickHouse moves to the next target every `switchEveryMs`. */
      const cycle = async (durationMs: number, switchEveryMs: number) => {
        const started = Date.now();
        let next = 0;
        const switcher = setInterval(() => void clickhouse.use(targets[++next % targets.length] as string), switchEveryMs);
        try {
          return await pollTally(urls, { concurrency: 4, pauseMs: 5, ceiling: value, stop: () => Date.now() - started >= durationMs });
        } finally {
          clearInterval(switcher);
          await clickhouse.use(good.target);
        }
      };
      // Warm-up: every target's client and every code path once, then let sockets settle.
      await cycle(SWITCH_EVERY_MS * 2, SWITCH_EVERY_MS / 4);
      await new Promise((r) => setTimeout(r, 4_000));
      const fdBaseline = openFdCount();
      const rssBaseline = process.memoryUsage().rss;

      const started = Date.now();
      const tally = await cycle(SOAK_MS, SWITCH_EVERY_MS);
      const rssAfter = process.memoryUsage().rss;
      console.info(
        `[soak] ${tally.total} requests in ${Math.round((Date.now() - started) / 1000)} s, sources ${JSON.stringify(tally.bySource)}, ` +
          `RSS ${mb(rssBaseline)} → ${mb(rssAfter)}, fds ${fdBaseline} → ${openFdCount()} (before settling)`,
      );
      expect(tally.firstProblem).toBeUndefined();
      expect(tally.non200).toBe(0);
      expect(tally.aboveCeiling).toBe(0);
      expect(tally.bySource.last_good ?? 0).toBeGreaterThan(0);
      expect(tally.bySource.fresh ?? 0).toBeGreaterThan(0);
      expect(rssAfter - rssBaseline).toBeLessThan(RSS_MARGIN_BYTES);
      if (fdBaseline === undefined) {
        if (inCi()) throw new MissingInCiError('fd check: /proc/self/fd is not readable here');
        console.warn('[skip] fd check: /proc/self/fd is not readable here');
        return;
      }
      // Aborted queries, idle keep-alive sockets and held black-hole sockets close within a few seconds.
      await vi.waitFor(() => expect(openFdCount()).toBeLessThanOrEqual(fdBaseline + FD_MARGIN), { timeout: 15_000, interval: 250 });
    },
    SOAK_MS + 60_000,
  );
});

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
