import { basename, extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { quoteColumn } from '../clickhouse/identifiers.js';
import { parseSecondsOrDuration } from '../config/duration.js';
import { describeError, isDfeError, showValue } from '../errors.js';
import { parseCeilings, type HuntCeilings } from './ceilings.js';
import { parseInterval } from './interval.js';
import { assertHuntId, phaseOffset } from './arithmetic.js';
import { compileStatement, type CompiledStatement } from './window.js';

/**
 * One hunt definition file (docs/hunts.md), parsed and validated in full before it
 * is used. Pure: text in, a named outcome out.
 */
export interface HuntSpec {
  /** The file stem. */
  readonly huntId: string;
  readonly file: string;
  readonly intervalSeconds: number;
  /**
   * The offset a fresh row gets: the pinned one when the file pins it, else the
   * §7.1 hash. What actually runs is hunt_schedule.phase_offset (docs/smoothing.md).
   */
  readonly phaseOffset: number;
  /** `schedule.phase_offset` when the file pins it (0 ≤ offset < interval). */
  readonly pinnedOffset: number | undefined;
  /** What the author wrote, e.g. `5m` or `*\/5 * * * *`, for logs and `due`. */
  readonly scheduleText: string;
  readonly statements: readonly CompiledStatement[];
  readonly windowColumn: string | undefined;
  /** Per-hunt ClickHouse settings, applied to every statement of a run. */
  readonly settings: Readonly<Record<string, string | number | boolean>>;
  /** Per-hunt auto-disable ceilings on its p95 cost; each replaces the global one. */
  readonly ceilings: HuntCeilings;
  /** `max_catchup` in seconds when the file sets it (≥ interval); replaces DFE_HUNT_MAX_CATCHUP_SECONDS. */
  readonly maxCatchupSeconds: number | undefined;
}

export type HuntFileResult =
  | { readonly kind: 'hunt'; readonly spec: HuntSpec }
  /** A mode this runner does not run (e.g. `anchored`): logged, not an error. */
  | { readonly kind: 'skipped'; readonly file: string; readonly reason: string }
  | { readonly kind: 'invalid'; readonly file: string; readonly key: string; readonly reason: string };

/** Settings the runner sets itself on every statement; a hunt may not override them. */
export const RUNNER_SETTINGS = Object.freeze(['log_comment', 'insert_deduplication_token']);

const SETTING_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const fileSchema = z
  .object({
    description: z.string().optional(),
    schedule: z
      .object({
        mode: z.string().min(1),
        interval: z.union([z.number(), z.string()]).optional(),
        phase_offset: z.unknown().optional(),
      })
      .strict(),
    queries: z.array(z.string().trim().min(1, { message: 'a query is empty' })).min(1, { message: 'needs at least one query' }),
    window_column: z.string().min(1).optional(),
    settings: z
      .record(z.string().regex(SETTING_NAME, { message: 'setting names are identifiers' }), z.union([z.string(), z.number(), z.boolean()]))
      .optional(),
    ceilings: z.unknown().optional(),
    max_catchup: z.unknown().optional(),
  })
  .strict();

export function huntIdOfFile(file: string): string {
  return basename(file, extname(file));
}

function invalid(file: string, key: string, reason: string): HuntFileResult {
  return { kind: 'invalid', file, key, reason };
}

export function compileHuntFile(file: string, text: string, spreadFraction: number): HuntFileResult {
  const huntId = huntIdOfFile(file);
  try {
    assertHuntId(huntId);
  } catch (err) {
    return invalid(file, 'hunt_id', describeError(err));
  }
  let raw: unknown;
  try {
    // logLevel error: warnings would go to stderr, outside pino; errors still throw.
    raw = parseYaml(text, { logLevel: 'error' });
  } catch (err) {
    return invalid(file, 'yaml', `is not valid YAML (${describeError(err)})`);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return invalid(file, issue?.path.join('.') || 'file', issue?.message ?? 'invalid');
  }
  const def = parsed.data;
  if (def.schedule.mode !== 'rate') {
    return { kind: 'skipped', file, reason: `schedule.mode ${JSON.stringify(def.schedule.mode)} is not run by this runner (only rate)` };
  }
  if (def.schedule.interval === undefined) return invalid(file, 'schedule.interval', 'is required for mode rate');
  const interval = parseInterval(def.schedule.interval);
  if (interval.kind === 'invalid') {
    return invalid(file, 'schedule.interval', `${JSON.stringify(def.schedule.interval)} ${interval.reason}`);
  }
  const pinned = def.schedule.phase_offset;
  if (pinned !== undefined && !(typeof pinned === 'number' && Number.isSafeInteger(pinned) && pinned >= 0 && pinned < interval.seconds)) {
    return invalid(file, 'schedule.phase_offset', `${showValue(pinned)} must be a whole number of seconds with 0 ≤ offset < interval (${interval.seconds})`);
  }
  const maxCatchup = def.max_catchup === undefined ? undefined : parseSecondsOrDuration(def.max_catchup);
  if (def.max_catchup !== undefined && (maxCatchup === undefined || maxCatchup < interval.seconds)) {
    return invalid(
      file,
      'max_catchup',
      `${showValue(def.max_catchup)} must be whole seconds or a duration such as 12h or 1d, at least the interval (${interval.seconds} s)`,
    );
  }
  const ceilings = parseCeilings(def.ceilings);
  if (ceilings.kind === 'invalid') return invalid(file, ceilings.key, ceilings.reason);
  for (const key of Object.keys(def.settings ?? {})) {
    if (RUNNER_SETTINGS.includes(key)) return invalid(file, `settings.${key}`, 'is set by the runner on every statement');
  }
  if (def.window_column !== undefined) {
    try {
      quoteColumn(def.window_column, 'window_column');
    } catch (err) {
      return invalid(file, 'window_column', describeError(err));
    }
  }
  const statements: CompiledStatement[] = [];
  for (const [index, sql] of def.queries.entries()) {
    try {
      statements.push(compileStatement(sql, def.window_column));
    } catch (err) {
      return invalid(file, `queries.${index}`, isDfeError(err, 'HUNT_SPEC_INVALID') ? err.message : describeError(err));
    }
  }
  return {
    kind: 'hunt',
    spec: Object.freeze({
      huntId,
      file,
      intervalSeconds: interval.seconds,
      phaseOffset: pinned ?? phaseOffset(huntId, interval.seconds, spreadFraction),
      pinnedOffset: pinned,
      scheduleText: String(def.schedule.interval),
      statements: Object.freeze(statements),
      windowColumn: def.window_column,
      settings: Object.freeze({ ...(def.settings ?? {}) }),
      ceilings: ceilings.ceilings,
      maxCatchupSeconds: maxCatchup,
    }),
  };
}
