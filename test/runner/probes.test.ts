import { capturingLogger } from '../helpers/logger.js';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse } from '../../src/clickhouse/client.js';
import { loadConfig } from '../../src/config/load.js';
import { readSchedule } from '../../src/coordination/materialise.js';
import { applySchema, coordinationSettings } from '../../src/coordination/topology.js';
import { startRunner } from '../../src/runner/start.js';
import { freePort } from '../helpers/ports.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * The runner process surface: /livez, /readyz, /metrics over a real socket;
 * ClickHouse down (a refused port) skips ticks without dying; the hunts
 * directory is re-read when it changes, a bad file counted and skipped.
 */
let db: TestDatabase;
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  db = await openTestDatabase('probes');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => db?.close());

async function get(url: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
}

function metricValue(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe('runner probes and resilience', () => {
  it('with ClickHouse unreachable: ticks are skipped, logged once, the process stays live but not ready', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('fine', 'schedule: {mode: rate, interval: 60}\nqueries: [SELECT 1]\n');
    hunts.write('bad', 'schedule: {mode: rate, interval: never}\nqueries: [SELECT 1]\n');
    const config = loadConfig({ DFE_CLICKHOUSE_URL: `http://127.0.0.1:${await freePort()}`, DFE_HUNTS_DIR: hunts.dir, LOG_LEVEL: 'silent' });
    const handle = await openClickHouse(config.clickhouse);
    cleanups.push(() => handle.close());
    const { logger: log, lines } = capturingLogger();
    const runner = await startRunner({ handle, config, log, loop: false, serve: { host: '127.0.0.1', port: 0 } });
    cleanups.push(() => runner.stop());

    for (let i = 0; i < 3; i += 1) expect(await runner.tick()).toBeUndefined();
    const downLines = lines.filter((l) => String(l.msg).includes('ClickHouse unreachable'));
    expect(downLines).toHaveLength(1);
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes('bad.yaml'))).toBe(true);

    expect(await get(`${runner.metricsUrl}/livez`)).toEqual({ status: 200, text: 'ok\n' });
    expect(await get(`${runner.metricsUrl}/readyz`)).toEqual({ status: 503, text: 'ClickHouse unreachable\n' });
    const metrics = await get(`${runner.metricsUrl}/metrics`);
    expect(metricValue(metrics.text, 'dfe_hunt_spec_errors_total')).toBe(1);
    expect(metricValue(metrics.text, 'dfe_hunt_tick_duration_seconds_count')).toBe(3);
  });

  it('a taken metrics port stops the start before any tick: no runner without probes', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('fine', 'schedule: {mode: rate, interval: 60}\nqueries: [SELECT 1]\n');
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => taken.close(() => resolve())));
    const { port } = taken.address() as AddressInfo;
    // Its own database: the start materialises before it serves, and the other tests read the schedule.
    const own = await openTestDatabase('probes_port');
    cleanups.push(() => own.close());
    await applySchema(own.handle.client, own.database, { kind: 'single' });
    const config = runnerConfig(own, hunts.dir, { DFE_HUNT_RUNNER_POLL_SECONDS: '0.2' });
    const handle = await openClickHouse(config.clickhouse);
    cleanups.push(() => handle.close());
    const started = startRunner({ handle, config, runnerId: 'port-taken', serve: { host: '127.0.0.1', port } });
    await expect(started).rejects.toThrow(/EADDRINUSE/);
    // Several poll periods: a loop left running would have written heartbeats by now.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const rs = await own.handle.client.query({
      query: `SELECT count() AS n FROM \`${own.database}\`.hunt_runner_heartbeat WHERE runner_id = 'port-taken'`,
      format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ n: string | number }>();
    expect(Number(row?.n)).toBe(0);
  });

  it('reloads a changed hunts directory: materialises new hunts, tombstones removed ones, counts bad files', async () => {
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write('first', 'schedule: {mode: rate, interval: 3600}\nqueries: [SELECT 1]\n');
    const config = runnerConfig(db, hunts.dir);
    const { logger: log, lines } = capturingLogger();
    const runner = await startRunner({ handle: db.handle, config, log, loop: false, serve: { host: '127.0.0.1', port: 0 } });
    cleanups.push(() => runner.stop());
    expect(await runner.tick()).toBeDefined();
    expect((await get(`${runner.metricsUrl}/readyz`)).status).toBe(200);

    hunts.write('second', 'schedule: {mode: rate, interval: 1h30m}\nqueries: [SELECT 2]\n');
    hunts.write('broken', 'schedule: {mode: rate}\nqueries: [SELECT 3]\n');
    rmSync(`${hunts.dir}/first.yaml`);
    expect(await runner.tick()).toBeDefined();
    await runner.idle();

    const schedule = await readSchedule(db.handle.client, db.database, coordinationSettings({ kind: 'single' }));
    expect(schedule.map((r) => [r.hunt_id, r.interval_seconds, r.enabled])).toEqual([
      ['first', 0, 0],
      ['second', 5400, 1],
    ]);
    expect(lines.some((l) => String(l.msg).includes('hunts directory changed'))).toBe(true);
    expect(lines.some((l) => String(l.msg).includes('(1 added, 0 changed, 1 tombstoned)'))).toBe(true);
    const metrics = await get(`${runner.metricsUrl}/metrics`);
    expect(metricValue(metrics.text, 'dfe_hunt_spec_errors_total')).toBe(1);
    expect(metrics.text).toMatch(/^dfe_hunt_backlog \d+$/m);
  });
});
