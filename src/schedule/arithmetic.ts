import { createHash } from 'node:crypto';
import { DfeError, showValue } from '../errors.js';

/**
 * Schedule arithmetic (docs/schedule.md). Must match the original bit for bit so a
 * migrated fleet keeps its fire times. All times are integer epoch seconds.
 */
export const DEFAULT_SPREAD_FRACTION = 0.8;

/** `max(1, trunc(interval × fraction))`, the multiply done in IEEE doubles. */
export function spreadWindow(intervalSeconds: number, fraction = DEFAULT_SPREAD_FRACTION): number {
  return Math.max(1, Math.trunc(intervalSeconds * fraction));
}

/** Rejects ids whose UTF-8 encoding would be lossy (lone surrogates). */
export function assertHuntId(id: string): void {
  if (id.length === 0 || !id.isWellFormed()) {
    throw new DfeError('HUNT_SPEC_INVALID', `hunt id ${showValue(id)} is not a well-formed non-empty string`, {
      key: 'hunt_id',
      value: id,
    });
  }
}

/** SHA-256 of the id's UTF-8 bytes, big-endian unsigned, mod the spread window. */
export function phaseOffset(id: string, intervalSeconds: number, fraction = DEFAULT_SPREAD_FRACTION): number {
  assertHuntId(id);
  assertInterval(intervalSeconds);
  const digest = createHash('sha256').update(id, 'utf8').digest('hex');
  return Number(BigInt(`0x${digest}`) % BigInt(spreadWindow(intervalSeconds, fraction)));
}

function assertInterval(intervalSeconds: number): void {
  if (!Number.isSafeInteger(intervalSeconds) || intervalSeconds < 1) {
    throw new DfeError('HUNT_SPEC_INVALID', `interval ${showValue(intervalSeconds)} must be a whole number of seconds ≥ 1`, {
      key: 'interval',
      value: intervalSeconds,
    });
  }
}

/** The latest scheduled fire at or before `now`. */
export function latestFire(nowSeconds: number, intervalSeconds: number, offsetSeconds: number): number {
  const current = Math.floor(nowSeconds / intervalSeconds) * intervalSeconds + offsetSeconds;
  return nowSeconds >= current ? current : current - intervalSeconds;
}

/** The first scheduled fire strictly after `now`. */
export function nextFire(nowSeconds: number, intervalSeconds: number, offsetSeconds: number): number {
  return latestFire(nowSeconds, intervalSeconds, offsetSeconds) + intervalSeconds;
}

/** Coordination state of one hunt, as the due SQL sees it after collapsing each table. */
export interface HuntCoordinationState {
  readonly intervalSeconds: number;
  readonly phaseOffset: number;
  /** Newest watermark (the last completed fire), or null when the hunt never ran. */
  readonly watermark: number | null;
  /** `lease_until` of the newest lease row, or null when there is none. */
  readonly leaseUntil: number | null;
  /** Fires of pending run-now requests. */
  readonly requestedFires?: readonly number[];
  /**
   * `disabled_reason` of the newest hunt_state row ('' or absent = not disabled).
   * An auto-disabled hunt is never due, neither its schedule nor a run-now, until
   * `enable` writes a newer row with an empty reason (docs/tables.md).
   */
  readonly disabledReason?: string;
}

export type DueDecision =
  | { readonly due: false }
  | { readonly due: true; readonly fire: number; readonly requested: boolean };

const NOT_DUE: DueDecision = Object.freeze({ due: false });

function owed(fire: number, watermark: number | null): boolean {
  return watermark === null || watermark < fire;
}

/**
 * The due predicate (docs/schedule.md#due, docs/tables.md#the-due-rule): a hunt that is not
 * auto-disabled is due when the scheduled fire is owed and the lease is free; else the newest
 * pending run-now request (fire ≤ now, above the watermark)
 * is owed and the lease is free. The SQL in due-sql.ts implements exactly this.
 */
export function dueDecision(state: HuntCoordinationState, nowSeconds: number): DueDecision {
  if (state.disabledReason) return NOT_DUE;
  if (state.leaseUntil !== null && state.leaseUntil > nowSeconds) return NOT_DUE;
  const fire = latestFire(nowSeconds, state.intervalSeconds, state.phaseOffset);
  if (owed(fire, state.watermark)) return { due: true, fire, requested: false };
  let requested: number | null = null;
  for (const r of state.requestedFires ?? []) {
    if (r <= nowSeconds && owed(r, state.watermark) && (requested === null || r > requested)) requested = r;
  }
  return requested === null ? NOT_DUE : { due: true, fire: requested, requested: true };
}
