import { parseError } from '@clickhouse/client';
import { describe, expect, it } from 'vitest';
import { isQuorumBusy, withQuorumRetry } from '../../../src/coordination/quorum-retry.js';

/**
 * The error text is ClickHouse's own format for code 286, parsed by the client's
 * own parser — exactly what a replicated server's rejection turns into. (No
 * replicated ClickHouse with Keeper runs here, so the retry is tested on that error.)
 */
const QUORUM_BUSY_TEXT =
  'Code: 286. DB::Exception: Quorum for previous write has not been satisfied yet. Status: version: 1 part_name: all_1_1_0. ' +
  '(UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE) (version 24.8.4.13 (official build))';

describe('quorum-busy retry', () => {
  const noSleep = async () => undefined;

  it('recognises code 286 from the parsed server error, and nothing else', () => {
    expect(isQuorumBusy(parseError(QUORUM_BUSY_TEXT))).toBe(true);
    expect(isQuorumBusy(parseError('Code: 60. DB::Exception: Table dfe.hunt_lease does not exist. (UNKNOWN_TABLE)'))).toBe(false);
    expect(isQuorumBusy(new Error('connect ECONNREFUSED'))).toBe(false);
  });

  it('retries a quorum-busy write until it lands, with the backoff given', async () => {
    const slept: number[] = [];
    let calls = 0;
    const result = await withQuorumRetry(
      async () => {
        calls += 1;
        if (calls < 3) throw parseError(QUORUM_BUSY_TEXT);
        return 'written';
      },
      async (ms) => {
        slept.push(ms);
      },
      [10, 20, 40],
    );
    expect({ result, calls, slept }).toEqual({ result: 'written', calls: 3, slept: [10, 20] });
  });

  it('gives up after the last delay, and never retries other errors', async () => {
    let calls = 0;
    const busy = withQuorumRetry(async () => {
      calls += 1;
      throw parseError(QUORUM_BUSY_TEXT);
    }, noSleep, [1, 1]);
    await expect(busy).rejects.toThrow(/Quorum for previous write/);
    expect(calls).toBe(3);

    let other = 0;
    const refused = withQuorumRetry(async () => {
      other += 1;
      throw new Error('connect ECONNREFUSED 127.0.0.1:8123');
    }, noSleep);
    await expect(refused).rejects.toThrow(/ECONNREFUSED/);
    expect(other).toBe(1);
  });
});
