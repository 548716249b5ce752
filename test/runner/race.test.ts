import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { formatVerifyReport, verifyCoordination, type VerifyReport } from '../../src/runner/verify-coordination.js';
import { keeperEnv } from '../helpers/keeper.js';
import { needs } from '../helpers/requirement.js';

/**
 * Real races (docs/claim-protocol.md): 4 runners on one store, each with its own engine
 * connections, 51 hunts at 1–3 s for 60 s, in both claim modes; runner 0 is killed 20 s
 * in and a new runner takes its place 5 s later. Every fire is counted from the tables
 * (the hunts' output rows in a plain MergeTree, where a second run shows as a second row,
 * and hunt_run), never from the runners' counters: 0 fires run twice, 0 owed fires unrun.
 *
 * Why runners in one process: the embedded engine allows one process per data directory,
 * so a second runner process cannot open the store. Each runner has its own connections
 * (one engine session each, run in parallel by chdb); "killed" is the runner aborted like
 * a crash (no release, no watermark) and its connections closed under it, at a moment when
 * none of its output INSERTs is in flight (verifyCoordination says why; it runs one fire at a
 * time for that). Its connections stay open: closing an embedded connection under queries
 * still queued on it stalls chdb's process-wide parameter queue.
 *
 * Keeper mode races for real here: claims are strict inserts on separate connections, with
 * no gate. The table protocol does NOT race on the embedded engine: a claim's free read and
 * insert pass the process-wide claim gate (quirk 5, docs/embedded.md), so table claims never
 * interleave and the settle wait, read-back and tie rule meet no concurrent claimant. With
 * DFE_CLICKHOUSE_URL set the table-protocol run goes to that server, where nothing gates it.
 */
const RUN = { runners: 4, seconds: 60, hunts: 51, intervals: [1, 2, 3], kill: { atSeconds: 20, restartAfterSeconds: 5 } };
/**
 * Lease 30 s: both modes rest on "a run never outlives its lease" (docs/claim-protocol.md).
 * On the embedded engine every parameter-bound query (a Keeper renewal is one) queues in one
 * process-wide line, and on a loaded 2-core machine a 4 s lease was seen to expire under a
 * running fire — its hunt taken over and a window run twice, as the docs say. Cap 4 per runner
 * keeps that line short enough for a 30 s lease; a killed runner's hunts wait that long.
 */
const TIMING = { DFE_HUNT_RUNNER_LEASE_SECONDS: '30', DFE_HUNT_RUNNER_SETTLE_MS: '300', DFE_HUNT_RUNNER_CAP: '4' };

function check(report: VerifyReport, lines: string[]): void {
  console.log(`${formatVerifyReport(report)}${lines.join('\n')}`);
  expect(lines.some((l) => l.startsWith('killed verify-0'))).toBe(true);
  expect(lines.some((l) => l.startsWith('restarted'))).toBe(true);
  expect(report.coverage.owed).toBeGreaterThan(RUN.hunts * 20);
  expect({ doubled: report.coverage.doubled, doubleRunRows: report.doubleRunRows, missed: report.coverage.missed, examples: report.coverage.examples }).toEqual({
    doubled: 0,
    doubleRunRows: 0,
    missed: 0,
    examples: [],
  });
  expect(report.ok).toBe(true);
}

describe('a real race: 4 runners, 51 hunts at 1–3 s, 60 s, one runner killed and restarted', () => {
  it('Keeper mode (KeeperMap on testkeeper, in-process): every owed fire exactly once', async () => {
    const lines: string[] = [];
    const config = loadConfig({ ...keeperEnv('unused'), ...TIMING, DFE_COORDINATION_CLAIMS: 'keeper' });
    const report = await verifyCoordination({ config, ...RUN, progress: (l) => lines.push(l) });
    expect(report.claims).toBe('keeper');
    check(report, lines);
  }, 400_000);

});

/**
 * The table protocol races only on a server: on the embedded engine its claims pass one
 * process-wide gate (src/clickhouse/embedded.ts), so no rival read interleaves and nothing
 * would be raced. Its run on the embedded engine is test/cli/verify-coordination.test.ts's.
 */
const SERVER_URL = process.env.DFE_CLICKHOUSE_URL;
const NO_SERVER = SERVER_URL ? undefined : 'no DFE_CLICKHOUSE_URL: the table protocol is gated on the embedded engine, so only a server can race it';

needs(NO_SERVER, 'mode').describe('a real race of the table protocol on a server: 4 runners, 51 hunts at 1–3 s, 60 s, one runner killed and restarted', () => {
  it('every owed fire exactly once', async () => {
    const lines: string[] = [];
    const config = loadConfig({ ...TIMING, DFE_CLICKHOUSE_BACKEND: 'server', DFE_CLICKHOUSE_URL: SERVER_URL ?? '', DFE_COORDINATION_CLAIMS: 'tables' });
    const report = await verifyCoordination({ config, ...RUN, progress: (l) => lines.push(l) });
    expect(report.claims).toBe('tables');
    check(report, lines);
  }, 600_000);
});
