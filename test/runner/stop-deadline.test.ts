import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchema } from '../../src/coordination/topology.js';
import { startRunner } from '../../src/runner/start.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { capturingLogger } from '../helpers/logger.js';
import { createOutputTable, outputHunt, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';

/**
 * `stop()` ends within DFE_HUNT_RUNNER_STOP_DEADLINE_SECONDS (docs/runner.md#stopping): a run
 * whose statement stalls (a long query on the engine) is abandoned, and the log names it by
 * hunt and fire. No timing is asserted: that stop returns at all is the point (without the
 * deadline it waits for the statement), and what it says it abandoned.
 */
let db: TestDatabase;

beforeAll(async () => {
  db = await openTestDatabase('stopdeadline');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOutputTable(db);
});
afterAll(async () => db?.close());

describe('stop with a stalled run', () => {
  it('returns after the deadline and logs the abandoned run (hunt, fire)', async () => {
    const id = 'stalled';
    const hunts = tempHuntsDir();
    const log = capturingLogger('warn');
    hunts.write(id, outputHunt(db.database, id, 3600, { sleepSeconds: 8 }));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let claimed!: (outcome: string) => void;
    let claim = new Promise<string>((resolve) => (claimed = resolve));
    const runner = await startRunner({
      handle: db.handle,
      config: runnerConfig(db, hunts.dir, { DFE_HUNT_RUNNER_STOP_DEADLINE_SECONDS: '0.5' }),
      log: log.logger,
      runnerId: 'stopper',
      loop: false,
      events: { claim: (e) => claimed(e.outcome), statement: (e) => void (e.index === 0 && started()) },
    });
    try {
      // A claim a loaded engine acknowledged late is given up at once (docs/claim-protocol.md):
      // tick again until one stands, then wait for the run's first statement.
      for (let tries = 1; ; tries += 1) {
        expect((await runner.tick())?.started).toBe(1);
        const outcome = await claim;
        if (outcome === 'won') break;
        expect(tries, `claim ${tries} was ${outcome}`).toBeLessThan(10);
        claim = new Promise<string>((resolve) => (claimed = resolve));
      }
      await running;
      await runner.stop();
    } finally {
      hunts.remove();
    }
    const abandoned = log.lines.filter((l) => l.msg?.toString().startsWith('stop deadline passed'));
    expect(abandoned).toHaveLength(1);
    expect(abandoned[0]).toMatchObject({ level: 40, abandoned: [{ huntId: id, fire: expect.any(Number) }], deadline_seconds: 0.5 });
    expect(String(abandoned[0]?.msg)).toContain(`${id}@`);
    // Nothing of the abandoned run was committed: the fire stays owed.
    const marks = await db.handle.client.query({
      query: `SELECT count() AS n FROM \`${db.database}\`.hunt_watermark WHERE hunt_id = {h:String}`,
      query_params: { h: id },
      format: 'JSONEachRow',
    });
    expect((await marks.json<{ n: number | string }>()).map((r) => Number(r.n))).toEqual([0]);
  });
});
