/**
 * How long a request may wait for an admission slot (docs/failsafe.md#admission):
 * until its deadline, less a margin to answer from the fail-safe path in time.
 */
export const ANSWER_MARGIN_MS = 50;

/** The margin: 50 ms, or a tenth of a short deadline. */
export function answerMarginMs(deadlineMs: number): number {
  return Math.min(ANSWER_MARGIN_MS, deadlineMs / 10);
}

/** Milliseconds left to wait for a slot, `elapsedMs` after the request arrived (≤ 0: none). */
export function waitBudgetMs(deadlineMs: number, elapsedMs: number): number {
  return deadlineMs - answerMarginMs(deadlineMs) - elapsedMs;
}
