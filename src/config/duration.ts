/**
 * A duration as hunt files and settings write it: `90s`, `5m`, `1h30m`, `1d`, `2d12h`
 * (units descending, each once) → whole seconds; undefined if it is not one.
 * Here, at the bottom of the layers, so settings and hunt files read durations alike.
 */
const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match || text === '') return undefined;
  const [, d = '0', h = '0', m = '0', s = '0'] = match;
  return Number(d) * 86_400 + Number(h) * 3_600 + Number(m) * 60 + Number(s);
}

/** Whole seconds (`86400`) or a duration (`1d`) → seconds ≥ 1, else undefined. */
export function parseSecondsOrDuration(raw: unknown): number | undefined {
  if (typeof raw === 'number') return Number.isSafeInteger(raw) && raw >= 1 ? raw : undefined;
  if (typeof raw !== 'string') return undefined;
  const text = raw.trim();
  const seconds = /^\d+$/.test(text) ? Number(text) : parseDuration(text);
  return seconds !== undefined && Number.isSafeInteger(seconds) && seconds >= 1 ? seconds : undefined;
}
