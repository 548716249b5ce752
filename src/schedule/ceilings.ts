import { showValue } from '../errors.js';

/**
 * Per-hunt cost ceilings from a hunt file's `ceilings:` map (docs/hunts.md, docs/smoothing.md
 * "Auto-disable"): a hunt whose p95 memory, CPU or duration crosses its ceiling is disabled
 * with reason `ceiling_<resource>`. A per-hunt value replaces the global one for that hunt.
 * Pure: a raw YAML value in, ceilings or the key and reason of the first bad value out.
 */
export interface HuntCeilings {
  readonly memoryBytes?: number;
  readonly cpuUs?: number;
  readonly durationMs?: number;
}

/** The file's key for each ceiling, in the order they are checked. */
export const CEILING_KEYS = Object.freeze({ memory_bytes: 'memoryBytes', cpu_us: 'cpuUs', duration_ms: 'durationMs' } as const);

export type CeilingsResult =
  | { readonly kind: 'ok'; readonly ceilings: HuntCeilings }
  | { readonly kind: 'invalid'; readonly key: string; readonly reason: string };

export function parseCeilings(raw: unknown): CeilingsResult {
  if (raw === undefined || raw === null) return { kind: 'ok', ceilings: Object.freeze({}) };
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    return { kind: 'invalid', key: 'ceilings', reason: `${showValue(raw)} must be a map of ${Object.keys(CEILING_KEYS).join(', ')}` };
  }
  const out: { -readonly [K in keyof HuntCeilings]: number } = {};
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    if (!Object.hasOwn(CEILING_KEYS, key)) {
      return { kind: 'invalid', key: `ceilings.${key}`, reason: `is not a ceiling (use ${Object.keys(CEILING_KEYS).join(', ')})` };
    }
    if (!(typeof value === 'number' && Number.isSafeInteger(value) && value >= 1)) {
      return { kind: 'invalid', key: `ceilings.${key}`, reason: `${showValue(value)} must be a whole number ≥ 1` };
    }
    out[CEILING_KEYS[key as keyof typeof CEILING_KEYS]] = value;
  }
  return { kind: 'ok', ceilings: Object.freeze(out) };
}
