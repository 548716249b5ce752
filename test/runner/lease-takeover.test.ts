import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeAndRecord } from '../../src/coordination/claims/mode.js';
import { TABLES } from '../../src/coordination/tables.js';
import { applySchema } from '../../src/coordination/topology.js';
import { startRunner } from '../../src/runner/start.js';
import type { TestDatabase } from '../helpers/clickhouse.js';
import { keeperEnv, openKeeperDatabase } from '../helpers/keeper.js';
import { capturingLogger } from '../helpers/logger.js';
import { createOutputTable, outputHunt, outputRows, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * A run whose Keeper lease another runner took over while it went on
 * (docs/claim-protocol.md#keeper-mode): its next renewal finds another token,
 * and the runner says so (a warning naming hunt and fire, and
 * dfe_hunt_lease_lost_total) instead of renewing on as if it still held it.
 * The takeover is what a taker's claim leaves on the lease key: another token
 * and owner, written into the real KeeperMap table mid-run.
 */
let db: TestDatabase;

beforeAll(async () => {
  db = await openKeeperDatabase('takeover');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  expect(await probeAndRecord(db.handle.client, db.database, { kind: 'single' })).toEqual({ mode: 'keeper' });
  await createOutputTable(db);
});
afterAll(async () => db?.close());

describe('a Keeper lease taken over mid-run', () => {
  it('is noticed at the next renewal: a warning naming hunt and fire, the counter, no renewal after', async () => {
    const id = 'taken-over';
    const hunts = tempHuntsDir();
    const log = capturingLogger('warn');
    // Lease 3 s, renewed every 1 s; the run lasts about 4 s.
    const config = runnerConfig(db, hunts.dir, {
      ...keeperEnv(db.database),
      DFE_HUNTS_DIR: hunts.dir,
      DFE_HUNT_RUNNER_LEASE_SECONDS: '3',
      DFE_HUNT_RUNNER_SETTLE_MS: '1000',
      DFE_COORDINATION_CLAIMS: 'keeper',
    });
    hunts.write(id, outputHunt(db.database, id, 3600, { sleepSeconds: 4 }));
    let takenOver: Promise<unknown> | undefined;
    const runner = await startRunner({
      handle: db.handle,
      config,
      log: log.logger,
      runnerId: 'stalled',
      loop: false,
      events: {
        statement: (e) =>
          void (e.index === 0 &&
            (takenOver ??= db.handle.client.command({
              query: `ALTER TABLE \`${db.database}\`.${TABLES.claim} UPDATE token = 'the-taker', owner = 'taker' WHERE claim_key = {k:String}`,
              query_params: { k: id },
            }))),
      },
    });
    try {
      expect((await runner.tick())?.started).toBe(1);
      await runner.idle();
      await takenOver;
    } finally {
      await runner.stop();
      hunts.remove();
    }
    // The run itself went on: its statement was already in ClickHouse.
    expect((await outputRows(db)).filter((r) => r.hunt_id === id)).toHaveLength(1);
    const lost = log.lines.filter((l) => l.msg?.toString().startsWith(`lease of hunt ${id} taken over`));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ level: 40, hunt: id, mode: 'keeper', fire: expect.any(Number) });
    const counter = await runner.metrics.leaseLost.get();
    expect(counter.values.find((v) => v.labels.hunt_id === id)?.value).toBe(1);
    // The taker's lease is untouched: the stalled runner renewed nothing over it, and its release was conditional on its own token.
    const rows = await db.handle.client.query({
      query: `SELECT owner, token FROM \`${db.database}\`.${TABLES.claim} WHERE claim_key = {k:String}`,
      query_params: { k: id },
      format: 'JSONEachRow',
    });
    expect(await rows.json()).toEqual([{ owner: 'taker', token: 'the-taker' }]);
  });
});
