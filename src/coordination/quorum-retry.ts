import { ClickHouseError } from '@clickhouse/client';

/**
 * Replicated coordination writes carry `insert_quorum` with
 * `insert_quorum_parallel = 0` (what `select_sequential_consistency` needs). Under
 * that setting ClickHouse REJECTS an insert into a table while the previous quorum
 * insert into it is still replicating (code 286, UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE)
 * — routine when several runners write leases at once. The rejected insert wrote
 * nothing, so retrying it shortly is safe; without the retry a release could fail
 * (the hunt held for a whole lease) or a watermark write (the fire run again).
 */
export const QUORUM_BUSY_CODE = '286';
export const QUORUM_BUSY_TYPE = 'UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE';

/** Backoff before each retry, ms: about 0.8 s in all, well inside one poll. */
export const QUORUM_RETRY_DELAYS_MS: readonly number[] = Object.freeze([25, 50, 100, 200, 400]);

export function isQuorumBusy(err: unknown): boolean {
  return err instanceof ClickHouseError && (err.code === QUORUM_BUSY_CODE || err.type === QUORUM_BUSY_TYPE);
}

export async function withQuorumRetry<T>(
  write: () => Promise<T>,
  sleep: (ms: number) => Promise<void>,
  delaysMs: readonly number[] = QUORUM_RETRY_DELAYS_MS,
): Promise<T> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await write();
    } catch (err) {
      const delayMs = delaysMs[attempt];
      if (!isQuorumBusy(err) || delayMs === undefined) throw err;
      await sleep(delayMs);
    }
  }
}
