import { Agent, request } from 'undici';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { goal, int, mb, type BenchLine } from './report.js';
import { startBenchShim } from './servers.js';

/**
 * docs/failsafe.md#order-of-a-request: 100 000 distinct parameter values must not grow memory
 * past what the LRU bound (default 10 000 keys) holds. Runs on the embedded
 * engine (query parameters need a modern ClickHouse). RSS is read after the
 * first 10 000 values (cache filling) and after all of them (cache full,
 * evicting): the second growth is the one that must stay small.
 */
const TOTAL = 100_000;
const FILL = 10_000;
const CONCURRENCY = 16;

export async function benchDistinctParams(embedded: ClickHouseHandle, database: string): Promise<BenchLine[]> {
  const shim = await startBenchShim(
    `queries:\n  distinct:\n    database: ${database}\n    params: [p]\n    sql: "SELECT length({p:String}) AS value"\n`,
    embedded,
  );
  const agent = new Agent({ connections: CONCURRENCY });
  let non200 = 0;
  let sent = 0;
  const send = async (limit: number) => {
    const loop = async () => {
      while (sent < limit) {
        const i = sent++;
        const res = await request(`${shim.url}/q/distinct?p=value-${i}`, { dispatcher: agent });
        await res.body.dump();
        if (res.statusCode !== 200) non200 += 1;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  };
  try {
    const startedMs = Date.now();
    const rss0 = process.memoryUsage().rss;
    await send(FILL);
    const rssFilled = process.memoryUsage().rss;
    await send(TOTAL);
    const rssEnd = process.memoryUsage().rss;
    const seconds = (Date.now() - startedMs) / 1000;
    const entries = shim.cacheSize();
    const afterFill = rssEnd - rssFilled;
    return [
      {
        kind: 'figure',
        name: `shim, ${int(TOTAL)} distinct parameter values (${Math.round(seconds)} s, embedded engine)`,
        measured: `RSS +${mb(rssEnd - rss0)} in all; +${mb(afterFill)} after the first ${int(FILL)}; cache ${int(entries)} entries; ${non200} non-200`,
        baseline: `first ${int(FILL)} values (filling the cache): +${mb(rssFilled - rss0)}`,
        goal: `cache ≤ ${int(FILL)} entries, RSS growth after the fill < 50 MB, all 200`,
        outcome: goal(entries <= FILL && afterFill < 50 * 1024 * 1024 && non200 === 0),
        shortName: `shim, ${int(TOTAL)} distinct parameter values`,
        headline: `RSS +${mb(afterFill)} after the cache filled at ${int(FILL)} entries (+${mb(rssEnd - rss0)} in all); ${non200} non-200`,
      },
    ];
  } finally {
    await agent.close();
    await shim.close();
  }
}
