import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { ManualClock } from '../../src/clock.js';
import { probeAndRecord } from '../../src/coordination/claims/mode.js';
import type { ClaimMode } from '../../src/coordination/claims/protocol.js';
import { applySchema } from '../../src/coordination/topology.js';
import type { RunEvent } from '../../src/runner/fire.js';
import { startRunner } from '../../src/runner/start.js';
import { queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { keeperEnv, openKeeperDatabase } from '../helpers/keeper.js';
import { runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * A claimant paused past its lease resumes after another runner took the hunt over
 * (docs/claim-protocol.md#the-invariant), in both claim modes, on the real engine. The
 * coordination clock is injected: moving it 70 s expires the first runner's 60 s lease
 * while its statement still runs, and makes a newer fire due. The taker must run the SAME
 * window (not one from the old watermark to the newer fire); the duplicate's rows are
 * deduplicated by the token in a table that deduplicates; the stale run does not commit;
 * the watermark never moves back; the next window starts where that one ended.
 */
const dbs: TestDatabase[] = [];
const extra: ClickHouseHandle[] = [];
afterAll(async () => {
  for (const h of extra) await h.close().catch(() => undefined);
  for (const db of dbs) await db.close();
});

function staleHunt(database: string, id: string): string {
  const insert = (table: string) =>
    `INSERT INTO \`${database}\`.${table} (hunt_id, window_start, window_end) SELECT '${id}', {window_start:Int64}, {window_end:Int64}`;
  return [
    'schedule: {mode: rate, interval: 60}',
    'settings:',
    '  function_sleep_max_microseconds_per_block: 60000000',
    '  max_block_size: 1',
    'queries:',
    `  - ${JSON.stringify('SELECT sum(sleepEachRow(0.5)) FROM numbers(6)')}`,
    `  - ${JSON.stringify(insert('out_raw'))}`,
    `  - ${JSON.stringify(insert('out_dedup'))}`,
    '',
  ].join('\n');
}

async function prepare(mode: ClaimMode): Promise<TestDatabase> {
  const db = await openKeeperDatabase(`stale_${mode}`);
  dbs.push(db);
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await probeAndRecord(db.handle.client, db.database, { kind: 'single' });
  const columns = '(hunt_id String, window_start Int64, window_end Int64, at DateTime64(3) DEFAULT now64(3))';
  // A plain MergeTree shows every run; the other deduplicates inserts by their token (docs/claim-protocol.md#output-tables).
  await db.handle.client.command({ query: `CREATE TABLE \`${db.database}\`.out_raw ${columns} ENGINE = MergeTree ORDER BY hunt_id` });
  await db.handle.client.command({
    query: `CREATE TABLE \`${db.database}\`.out_dedup ${columns} ENGINE = MergeTree ORDER BY hunt_id SETTINGS non_replicated_deduplication_window = 100`,
  });
  return db;
}

const windows = async (db: TestDatabase, table: string) =>
  (await queryRows<{ s: number | string; e: number | string }>(db, `SELECT window_start AS s, window_end AS e FROM \`${db.database}\`.${table} ORDER BY s, e`)).map(
    (r) => `${Number(r.s)}-${Number(r.e)}`,
  );

describe.each<ClaimMode>(['keeper', 'tables'])('a claimant paused past its lease (%s mode)', (mode) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await prepare(mode);
  });

  it('resumes after a takeover: same window, deduplicated rows, no stale commit, the watermark only forward', async () => {
    const id = 'stale';
    const hunts = tempHuntsDir();
    hunts.write(id, staleHunt(db.database, id));
    const clock = new ManualClock(1_800_000_000_000);
    const config = runnerConfig(db, hunts.dir, { ...keeperEnv(db.database), DFE_HUNTS_DIR: hunts.dir, DFE_HUNT_RUNNER_LEASE_SECONDS: '60', DFE_COORDINATION_CLAIMS: mode });
    const runs: RunEvent[] = [];
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const common = { config, clock, time: 'clock' as const, loop: false };
    const paused = await startRunner({
      ...common,
      handle: db.handle,
      runnerId: 'paused',
      events: { statement: (e) => void (e.index === 0 && started()), run: (e) => runs.push(e) },
    });
    const other = await openClickHouse(db.config);
    extra.push(other);
    const taker = await startRunner({ ...common, handle: other, runnerId: 'taker', events: { run: (e) => runs.push(e) } });
    try {
      expect((await paused.tick())?.started).toBe(1);
      await running;
      clock.advance(70_000); // the paused runner's lease is over, and a newer fire is due
      expect((await taker.tick())?.started).toBe(1);
      await Promise.all([paused.idle(), taker.idle()]);
      expect((await taker.tick())?.started).toBe(1); // the next window
      await taker.idle();
    } finally {
      await paused.stop();
      await taker.stop();
      hunts.remove();
    }
    const [stale, retake, next] = [runs.find((r) => r.runnerId === 'paused'), ...runs.filter((r) => r.runnerId === 'taker')];
    // The taker ran the paused runner's window, recorded at its claim, not [watermark, newer fire).
    expect(retake?.window).toEqual(stale?.window);
    expect(retake?.fire).toBe(stale?.fire);
    expect({ stale: stale?.outcome, retake: retake?.outcome, next: next?.outcome }).toEqual({ stale: 'failed', retake: 'succeeded', next: 'succeeded' });
    expect(next?.window.startSeconds).toBe(retake?.window.endSeconds);
    const first = `${stale?.window.startSeconds}-${stale?.window.endSeconds}`;
    const second = `${next?.window.startSeconds}-${next?.window.endSeconds}`;
    // Both runs of the first window wrote it (the raw table shows it); the deduplicating table keeps one copy.
    expect(await windows(db, 'out_raw')).toEqual([first, first, second]);
    expect(await windows(db, 'out_dedup')).toEqual([first, second]);
    // The watermark's writes, in order: only forward, and none from the stale run.
    const marks = await queryRows<{ w: number | string }>(db, `SELECT watermark AS w FROM \`${db.database}\`.hunt_watermark WHERE hunt_id = {h:String} ORDER BY updated`, {
      h: id,
    });
    expect(marks.map((m) => Number(m.w))).toEqual([stale?.fire, next?.fire]);
  });
});
