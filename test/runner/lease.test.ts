import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse } from '../../src/clickhouse/client.js';
import { applySchema } from '../../src/coordination/topology.js';
import { startRunner } from '../../src/runner/start.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { needs } from '../helpers/requirement.js';
import { createOutputTable, outputHunt, outputRows, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * The lease of a won run, at its edges (docs/runner.md#a-tick, steps 5–6): renewal stops
 * when the run ends, whatever ended it, and a renewal already on its way can
 * never land over the release and hold the hunt for a whole lease.
 */
let db: TestDatabase;
const cleanups: Array<() => Promise<void> | void> = [];
const LEASE = { DFE_HUNT_RUNNER_LEASE_SECONDS: '3', DFE_HUNT_RUNNER_SETTLE_MS: '1000' }; // renewal every 1 s

beforeAll(async () => {
  db = await openTestDatabase('lease');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOutputTable(db);
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => db?.close());

type LeaseRow = { owner: string; fire: number; lease_until: number };

async function leaseRows(huntId: string): Promise<LeaseRow[]> {
  const rows = await queryRows<Record<string, string | number>>(
    db,
    `SELECT owner, fire, lease_until FROM \`${db.database}\`.hunt_lease WHERE hunt_id = {h:String} ORDER BY claimed DESC, owner ASC`,
    { h: huntId },
  );
  return rows.map((r) => ({ owner: String(r.owner), fire: Number(r.fire), lease_until: Number(r.lease_until) }));
}

/** ~3 s of work on `client`'s own session (an embedded session runs one query at a time). */
function occupy(client: TestDatabase['handle']['client']): Promise<unknown> {
  return client.command({
    query: 'SELECT sum(sleepEachRow(0.5)) FROM numbers(6)',
    clickhouse_settings: { function_sleep_max_microseconds_per_block: '60000000', max_block_size: '1' },
  });
}

describe('the lease of a won run', () => {
  it('a renewal still on its way when the run ends lands before the release, never over it', async () => {
    const id = 'renewal-race';
    const hunts = tempHuntsDir();
    cleanups.push(hunts.remove);
    hunts.write(id, outputHunt(db.database, id, 3600, { sleepSeconds: 2 }));
    // The runner's coordination connection is busy from the run's start until after its
    // end, so the renewal due 1 s into the run is still queued when the run releases.
    let busy: Promise<unknown> | undefined;
    const runner = await startRunner({
      handle: db.handle,
      config: runnerConfig(db, hunts.dir, LEASE),
      runnerId: 'racer',
      loop: false,
      events: { statement: (e) => void (e.index === 0 && (busy ??= occupy(db.handle.client))) },
    });
    cleanups.push(() => runner.stop());
    expect((await runner.tick())?.started).toBe(1);
    await runner.idle();
    await busy;

    expect((await outputRows(db)).filter((r) => r.hunt_id === id)).toHaveLength(1);
    const [newest] = await leaseRows(id);
    expect(newest, 'the newest lease row is the release').toMatchObject({ owner: 'racer', lease_until: 0 });
  });

  // The failure to open a session is libchdb's one-data-directory-per-process rule: embedded only.
  const embeddedOnly = process.env.DFE_CLICKHOUSE_URL ? 'embedded engine only: the session failure is libchdb refusing a second data directory, and this run uses a server (DFE_CLICKHOUSE_URL)' : undefined;
  needs(embeddedOnly, 'mode').it(
    'a run that cannot open its session stops renewing its lease',
    async () => {
      const id = 'no-session';
      const hunts = tempHuntsDir();
      cleanups.push(hunts.remove);
      hunts.write(id, outputHunt(db.database, id, 3600));
      const config = runnerConfig(db, hunts.dir, LEASE);
      // libchdb refuses a second data directory in one process: a real failure to open.
      const elsewhere = mkdtempSync(join(tmpdir(), 'dfe-other-ch-'));
      cleanups.push(() => rmSync(elsewhere, { recursive: true, force: true }));
      const claims: string[] = [];
      const runner = await startRunner({
        handle: db.handle,
        config,
        runnerId: 'sessionless',
        loop: false,
        openSession: () => openClickHouse({ ...config.clickhouse, embeddedPath: elsewhere }),
        events: { claim: (e) => claims.push(e.outcome) },
      });
      cleanups.push(() => runner.stop());
      expect((await runner.tick())?.started).toBe(1);
      await runner.idle();
      expect(claims).toEqual(['won']);
      expect((await outputRows(db)).filter((r) => r.hunt_id === id)).toHaveLength(0);
      const [claimed] = await leaseRows(id);
      expect(claimed?.owner).toBe('sessionless');
      // Three renewal periods: a renewal that kept going would have moved lease_until by now.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const [newest] = await leaseRows(id);
      expect(newest, 'no renewal keeps a dead run’s lease').toEqual(claimed);
    },
  );
});
