/**
 * The servable range: what KEDA and the HPA can carry
 * (docs/failsafe.md#servable-range). KEDA turns a metrics-api number into milli-units with a
 * float64 multiply and an int64 conversion, and the HPA reads
 * `Quantity.MilliValue()` (int64): a value is carried only when
 * |value| × 1000 < 2^63 in float64 arithmetic. Above that the HPA sees garbage
 * (0, or a negative). The largest such value is 9 223 372 036 854 774
 * (…775 is not a float64; it rounds to …776, whose × 1000 is 2^63).
 * Used by the catalogue (cold_hold, clamp_*), the `hold` param and results.
 */
export const MILLI_LIMIT = 2 ** 63;
export const MAX_SERVABLE = 9_223_372_036_854_774;

/** Whether KEDA and the HPA can carry `value` (finite, |value| × 1000 < 2^63). */
export function isServable(value: number): boolean {
  return Number.isFinite(value) && Math.abs(value) * 1000 < MILLI_LIMIT;
}

/** For error messages: the range a hold, cold_hold or clamp must be in. */
export const SERVABLE_RANGE_TEXT = `|value| ≤ ${MAX_SERVABLE} (what KEDA and the HPA can carry as int64 milli-units)`;
