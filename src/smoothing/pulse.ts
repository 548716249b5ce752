import { DfeError, showValue } from '../errors.js';
import type { CurveSettings, HuntLoad } from './model.js';

/**
 * The geometry shared by the curve and the planner (docs/smoothing.md "The curve"):
 * the hyperperiod H, the bucket width Δ, B = ceil(H / Δ), and where one hunt's fires land.
 */
const HYPERPERIOD_CAP_SECONDS = 604_800;

export interface Geometry {
  readonly hyperperiodSeconds: number;
  readonly bucketSeconds: number;
  readonly buckets: number;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** lcm of the periods while it stays ≤ 7 days, else 7 days. An empty fleet gets one bucket. */
export function hyperperiodSeconds(periods: Iterable<number>, bucketSeconds: number): number {
  let lcm = 0;
  for (const period of periods) {
    lcm = lcm === 0 ? period : (lcm / gcd(lcm, period)) * period;
    if (lcm > HYPERPERIOD_CAP_SECONDS) return HYPERPERIOD_CAP_SECONDS;
  }
  return lcm === 0 ? bucketSeconds : lcm;
}

export function geometry(hunts: readonly HuntLoad[], bucketSeconds: number): Geometry {
  const h = hyperperiodSeconds(hunts.map((hunt) => hunt.periodSeconds), bucketSeconds);
  return { hyperperiodSeconds: h, bucketSeconds, buckets: Math.ceil(h / bucketSeconds) };
}

/** d = max(1, ceil(p95 duration / Δ)): how many buckets one fire covers. */
export function pulseWidth(durationMs: number, bucketSeconds: number): number {
  return Math.max(1, Math.ceil(durationMs / 1000 / bucketSeconds));
}

/**
 * Calls `visit(bucket)` for every bucket covered by every fire φ + kT < H, a fire
 * covering `width` buckets from floor((φ + kT) / Δ), wrapping mod B. A bucket covered
 * twice is visited twice (a pulse longer than the gap between fires overlaps itself).
 */
export function forEachCoveredBucket(
  g: Geometry,
  periodSeconds: number,
  offsetSeconds: number,
  width: number,
  visit: (bucket: number) => void,
): void {
  for (let t = offsetSeconds; t < g.hyperperiodSeconds; t += periodSeconds) {
    const start = Math.floor(t / g.bucketSeconds);
    for (let j = 0; j < width; j++) visit((start + j) % g.buckets);
  }
}

function invalid(key: string, value: unknown, problem: string, hunt?: string): DfeError {
  const where = hunt === undefined ? 'smoothing settings' : `hunt ${showValue(hunt)}`;
  return new DfeError(hunt === undefined ? 'CONFIG_INVALID' : 'HUNT_SPEC_INVALID', `${where}: key "${key}": ${showValue(value)} ${problem}`, {
    key,
    value,
  });
}

const positiveFinite = (n: number): boolean => Number.isFinite(n) && n > 0;
const nonNegativeFinite = (n: number): boolean => Number.isFinite(n) && n >= 0;

/** Checks what the arithmetic relies on; throws a DfeError naming the key and value. */
export function assertCurveInput(hunts: readonly HuntLoad[], settings: CurveSettings): void {
  if (!Number.isSafeInteger(settings.bucketSeconds) || settings.bucketSeconds < 1) {
    throw invalid('bucket_seconds', settings.bucketSeconds, 'must be a whole number of seconds ≥ 1');
  }
  if (!positiveFinite(settings.cpuCores)) throw invalid('cpu_cores', settings.cpuCores, 'must be > 0');
  if (!positiveFinite(settings.memoryCapBytes)) throw invalid('memory_cap_bytes', settings.memoryCapBytes, 'must be > 0');
  if (!nonNegativeFinite(settings.weights.cpu)) throw invalid('weights.cpu', settings.weights.cpu, 'must be ≥ 0');
  if (!nonNegativeFinite(settings.weights.mem)) throw invalid('weights.mem', settings.weights.mem, 'must be ≥ 0');
  const seen = new Set<string>();
  for (const hunt of hunts) {
    const id = hunt.huntId;
    if (seen.has(id)) throw invalid('hunt_id', id, 'appears twice', id);
    seen.add(id);
    if (!Number.isSafeInteger(hunt.periodSeconds) || hunt.periodSeconds < 1) {
      throw invalid('interval', hunt.periodSeconds, 'must be a whole number of seconds ≥ 1', id);
    }
    if (!Number.isSafeInteger(hunt.offsetSeconds) || hunt.offsetSeconds < 0 || hunt.offsetSeconds >= hunt.periodSeconds) {
      throw invalid('phase_offset', hunt.offsetSeconds, `must be a whole number in [0, ${hunt.periodSeconds})`, id);
    }
    const { durationMs, cpuUs, memoryBytes } = hunt.cost;
    if (!nonNegativeFinite(durationMs)) throw invalid('cost.durationMs', durationMs, 'must be a finite number ≥ 0', id);
    if (!nonNegativeFinite(cpuUs)) throw invalid('cost.cpuUs', cpuUs, 'must be a finite number ≥ 0', id);
    if (!nonNegativeFinite(memoryBytes)) throw invalid('cost.memoryBytes', memoryBytes, 'must be a finite number ≥ 0', id);
  }
}
