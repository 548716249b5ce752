import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, describe, expect, it } from 'vitest';
import { blackHoleServer, refusedPort } from '../helpers/faults.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { needs } from '../helpers/requirement.js';
import { agent, getJson, poll, startChaosShim, type Answer } from './harness.js';

/**
 * A REAL clickhouse-server process under the shim: killed (SIGKILL) mid-run
 * with queries in flight and restarted on the same port, and a shim that
 * starts while ClickHouse is down. Asserts answers and sources, not timings.
 */
const server = clickHouseServerAvailability();

afterAll(async () => {
  await agent.close();
});

// A query that is still running when the server dies (sleep returns 0, so the value is the count).
const slowJobsYaml = (deadlineMs: number) => `queries:
  jobs:
    database: default
    sql: "SELECT (SELECT count() FROM default.jobs) + sleep(0.3) AS value"
    deadline_ms: ${deadlineMs}
    timeout_seconds: 2
    cold_hold: 3
`;

async function seedJobs(ch: ClickHouseServerProcess, rows: number): Promise<void> {
  const client = createClient({ url: ch.url, log: { level: ClickHouseLogLevel.OFF } });
  try {
    await client.command({ query: 'CREATE TABLE IF NOT EXISTS default.jobs (n UInt32) ENGINE = MergeTree ORDER BY n' });
    await client.insert({ table: 'default.jobs', values: Array.from({ length: rows }, (_, n) => ({ n })), format: 'JSONEachRow' });
  } finally {
    await client.close();
  }
}

function sources(answers: readonly Answer[]): string[] {
  // Runs of the same source collapsed: ["fresh", "last_good", "fresh"].
  return answers.map((a) => a.body.source ?? `status ${a.status}`).filter((s, i, all) => i === 0 || all[i - 1] !== s);
}

needs(server.kind === 'missing' ? server.reason : undefined).describe('a real clickhouse-server killed mid-run and restarted', () => {
  it('every answer is 200 and the value holds: fresh → last_good → fresh', async () => {
    const ch = await startClickHouseServer();
    const chaos = await startChaosShim(slowJobsYaml(1_000), { url: ch.url });
    try {
      await seedJobs(ch, 5);
      const url = `${chaos.url}/q/jobs`;
      let restarted = false;
      const load = poll(url, {
        concurrency: 3,
        durationMs: 15_000,
        maxRequests: 5_000,
        until: (a) => a.atMs > 1_500 && restarted && a.body.source === 'fresh',
      });
      await new Promise((r) => setTimeout(r, 700));
      await ch.kill();
      await new Promise((r) => setTimeout(r, 700));
      await ch.restart();
      restarted = true;
      const answers = await load;
      expect(answers.filter((a) => a.status !== 200)).toEqual([]);
      expect(answers.every((a) => a.body.value === 5)).toBe(true);
      const seen = sources(answers);
      expect(seen[0]).toBe('fresh');
      expect(seen).toContain('last_good');
      expect(seen.at(-1)).toBe('fresh');
    } finally {
      await chaos.close();
      await ch.dispose();
    }
  });
});

describe('a cold start with ClickHouse down', () => {
  it('refused: answers cold_hold, /readyz and /livez stay 200; once ClickHouse is up, fresh', async () => {
    const down = await refusedPort();
    const chaos = await startChaosShim(slowJobsYaml(1_000), { url: down.url });
    let ch: ClickHouseServerProcess | undefined;
    try {
      expect(await getJson(`${chaos.url}/readyz`)).toMatchObject({ status: 200 });
      const cold = await poll(`${chaos.url}/q/jobs`, { concurrency: 2, durationMs: 500, maxRequests: 200 });
      expect(cold.length).toBeGreaterThan(0);
      expect(cold.every((a) => a.status === 200 && a.body.value === 3 && a.body.source === 'cold_hold')).toBe(true);
      expect(await getJson(`${chaos.url}/readyz`)).toMatchObject({ status: 200 });
      expect(await getJson(`${chaos.url}/livez`)).toMatchObject({ status: 200 });
      if (server.kind === 'missing') return;
      // ClickHouse comes up on the very port the shim was refused on.
      ch = await startClickHouseServer({ port: down.port });
      await seedJobs(ch, 2);
      const warm = await poll(`${chaos.url}/q/jobs`, {
        concurrency: 2,
        durationMs: 10_000,
        until: (a) => a.body.source === 'fresh',
      });
      expect(warm.every((a) => a.status === 200 && (a.body.value === 3 || a.body.value === 2))).toBe(true);
      expect(warm.at(-1)?.body).toMatchObject({ value: 2, source: 'fresh' });
    } finally {
      await chaos.close();
      await ch?.dispose();
    }
  });

  it('black hole: cold_hold by the deadline, /readyz 200 while queries hang', async () => {
    const hole = await blackHoleServer();
    const chaos = await startChaosShim(slowJobsYaml(200), { url: hole.url });
    try {
      const [answer, ready] = await Promise.all([getJson(`${chaos.url}/q/jobs`), getJson(`${chaos.url}/readyz`)]);
      expect(answer).toEqual({ status: 200, body: { value: 3, source: 'cold_hold', age_seconds: 0 } });
      expect(ready.status).toBe(200);
      expect(hole.hits()).toBeGreaterThan(0);
    } finally {
      await chaos.close();
      await hole.close();
    }
  });
});
