import { isServable, MAX_SERVABLE } from '../servable.js';

/**
 * What a value becomes before it is served: clamped to the query's band,
 * then made KEDA-safe — finite, ≥ 0, at most 3 decimals, and inside the
 * servable range (docs/api.md#answers, docs/failsafe.md#servable-range).
 */
export interface ClampBand {
  readonly clampMin: number | undefined;
  readonly clampMax: number | undefined;
}

export { isServable, MAX_SERVABLE, MILLI_LIMIT, SERVABLE_RANGE_TEXT } from '../servable.js';

export function clamp(value: number, band: ClampBand): number {
  let out = value;
  if (band.clampMin !== undefined && out < band.clampMin) out = band.clampMin;
  if (band.clampMax !== undefined && out > band.clampMax) out = band.clampMax;
  return out;
}

/**
 * Rounds to 3 decimals and floors at 0. A negative value (a query without a
 * `clamp_min`) becomes 0 rather than a failure: KEDA's quantities of a
 * metrics-api trigger are meant to be ≥ 0 and 0 scales nothing up.
 * Total: whatever it is given, it returns a finite number in [0, MAX_SERVABLE]
 * (never NaN, never null in JSON). Callers pass servable numbers (result
 * parsing, hold and catalogue validation reject the rest); an out-of-range
 * input saturates rather than overflowing `value * 1000`.
 */
export function servedValue(value: number): number {
  if (!Number.isFinite(value) || value <= 0) return 0;
  if (!isServable(value)) return MAX_SERVABLE;
  const rounded = Math.round(value * 1000) / 1000;
  return rounded === 0 ? 0 : rounded;
}

/** The number to store and serve for a good raw result. */
export function finalValue(raw: number, band: ClampBand): number {
  return servedValue(clamp(raw, band));
}

/** Seconds between two instants, rounded to milliseconds, never negative. */
export function ageSeconds(fromMs: number, nowMs: number): number {
  return Math.max(0, Math.round(nowMs - fromMs)) / 1000;
}
