import { CronExpressionParser } from 'cron-parser';
import { parseDuration } from '../config/duration.js';
import { DfeError } from '../errors.js';

export { parseDuration };

/**
 * A hunt's `schedule.interval` (docs/hunts.md): whole seconds, a duration such as
 * `90s`, `5m`, `1h30m`, `1d`, or a cron expression. Pure; every function either
 * returns whole seconds ≥ 1 or a reason string for the caller's error.
 */
export type IntervalParse =
  | { readonly kind: 'seconds'; readonly seconds: number }
  | { readonly kind: 'cron'; readonly seconds: number; readonly expression: string }
  | { readonly kind: 'invalid'; readonly reason: string };

/**
 * Cron sampling: a cron says how often, never when (a hunt still fires at its
 * hashed phase offset), so it becomes an interval: the MINIMUM gap between
 * consecutive fires over a sample of at most CRON_SAMPLE_FIRES fires within
 * CRON_SAMPLE_YEARS years from a fixed UTC start. A fixed start keeps the result
 * deterministic, so `materialise` never flaps; eight years include two leap days.
 * Sampling costs ~60 ms per expression, so results are cached (pure function).
 */
export const CRON_SAMPLE_START = Date.UTC(2001, 0, 1);
export const CRON_SAMPLE_FIRES = 1_000;
export const CRON_SAMPLE_YEARS = 8;

const cronCache = new Map<string, number>();
const CRON_CACHE_MAX = 1_000;

/** The minimum gap in seconds between consecutive fires of a cron expression. */
export function cronMinGapSeconds(expression: string): number {
  const cached = cronCache.get(expression);
  if (cached !== undefined) return cached;
  const seconds = sampleCron(expression);
  if (cronCache.size >= CRON_CACHE_MAX) cronCache.clear();
  cronCache.set(expression, seconds);
  return seconds;
}

function sampleCron(expression: string): number {
  const endDate = new Date(CRON_SAMPLE_START);
  endDate.setUTCFullYear(endDate.getUTCFullYear() + CRON_SAMPLE_YEARS);
  const cron = CronExpressionParser.parse(expression, { currentDate: new Date(CRON_SAMPLE_START), endDate, tz: 'UTC' });
  let previousMs: number | undefined;
  let minGapMs = Number.POSITIVE_INFINITY;
  for (let i = 0; i < CRON_SAMPLE_FIRES && cron.hasNext(); i += 1) {
    const fireMs = cron.next().getTime();
    if (previousMs !== undefined) minGapMs = Math.min(minGapMs, fireMs - previousMs);
    previousMs = fireMs;
  }
  if (!Number.isFinite(minGapMs)) {
    throw new DfeError('HUNT_SPEC_INVALID', `fires fewer than twice in ${CRON_SAMPLE_YEARS} years, so it has no interval`);
  }
  return Math.max(1, Math.floor(minGapMs / 1000));
}

function looksLikeCron(text: string): boolean {
  return /\s/.test(text) || text.startsWith('@');
}

export function parseInterval(raw: unknown): IntervalParse {
  if (typeof raw === 'number') {
    return Number.isSafeInteger(raw) && raw >= 1
      ? { kind: 'seconds', seconds: raw }
      : { kind: 'invalid', reason: 'must be a whole number of seconds ≥ 1' };
  }
  if (typeof raw !== 'string') return { kind: 'invalid', reason: 'must be seconds, a duration such as "5m", or a cron' };
  const text = raw.trim();
  if (/^\d+$/.test(text)) return parseInterval(Number(text));
  if (looksLikeCron(text)) {
    try {
      return { kind: 'cron', seconds: cronMinGapSeconds(text), expression: text };
    } catch (err) {
      return { kind: 'invalid', reason: `is not a usable cron expression (${err instanceof Error ? err.message : String(err)})` };
    }
  }
  const seconds = parseDuration(text);
  if (seconds === undefined) {
    return { kind: 'invalid', reason: 'must be seconds, a duration such as "90s", "5m", "1h30m", "1d", or a cron' };
  }
  if (seconds < 1 || !Number.isSafeInteger(seconds)) return { kind: 'invalid', reason: 'must be at least 1 second' };
  return { kind: 'seconds', seconds };
}
