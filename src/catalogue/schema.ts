import { z } from 'zod';
import { DATABASE_NAME } from '../config/schema.js';
import { isServable, SERVABLE_RANGE_TEXT } from '../servable.js';

/**
 * The YAML shape of ONE catalogue file (docs/catalogue.md#format), checked per file so that a
 * type error names the file it is in. Every key is optional here: a query in
 * an override may set a single key. Rules that span keys or files (sql vs
 * builtin, clamp order, deadline vs timeout, placeholders, sentinels) are
 * checked after the merge, in definition.ts and compile.ts.
 */
export const QUERY_NAME = /^[A-Za-z0-9_-]+$/;
/** Params and bind keys become ClickHouse `{name:Type}` placeholders: identifiers only. */
export const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/**
 * Request parameters the shim itself reads — `hold` (the trigger target, docs/failsafe.md#metric_type-value-and-hold)
 * and `api_key` (KEDA's apiKey auth in the query string) — never bound, never part
 * of a cache key, so a query may not declare them.
 */
export const RESERVED_PARAMS: readonly string[] = Object.freeze(['hold', 'api_key']);
export const BUILTINS = ['hunt_backlog'] as const;
export type Builtin = (typeof BUILTINS)[number];

const finite = (what = 'a finite number') => z.number({ error: `must be ${what}` });
const positive = finite('a number greater than 0').positive({ error: 'must be greater than 0' });
const nonNegative = finite('a number ≥ 0').nonnegative({ error: 'must be ≥ 0' });
/** A value the shim may serve (cold_hold) or clamp to: inside what KEDA and the HPA can carry. */
const servable = <T extends z.ZodNumber>(schema: T) => schema.refine(isServable, { error: `is outside the servable range ${SERVABLE_RANGE_TEXT}` });

const paramName = z
  .string({ error: 'must be a string' })
  .regex(PARAM_NAME, { error: 'must be an identifier ([A-Za-z_][A-Za-z0-9_]*)' })
  .refine((name) => !RESERVED_PARAMS.includes(name), { error: 'is reserved by the shim (hold: the trigger target; api_key: auth) and cannot be declared' });

const RESULT_FIELD = 'must be a column index (an integer ≥ 0) or a column name';

const bindValue = z.union([z.string(), z.number(), z.boolean()], { error: 'must be a string, a finite number or a boolean' });

/** Largest `batch.max_size`: that many rows of 253-character values stay under the 1 MiB read cap. */
export const MAX_BATCH_SIZE = 2_000;

/** The optional batch form (docs/catalogue.md#batch): one query answers many keys that differ in one param. */
const batchSchema = z.strictObject(
  {
    param: paramName.optional(),
    max_size: z
      .number({ error: `must be a whole number from 1 to ${MAX_BATCH_SIZE}` })
      .int({ error: `must be a whole number from 1 to ${MAX_BATCH_SIZE}` })
      .min(1, { error: `must be a whole number from 1 to ${MAX_BATCH_SIZE}` })
      .max(MAX_BATCH_SIZE, { error: `must be a whole number from 1 to ${MAX_BATCH_SIZE}` })
      .optional(),
    window_ms: nonNegative.optional(),
    sql: z.string({ error: 'must be a string of SQL' }).trim().min(1, { error: 'must not be empty' }).optional(),
  },
  { error: 'must be a mapping of param, max_size, window_ms and sql (or null to clear a batch an earlier file set)' },
);

export const rawQuerySchema = z.strictObject({
  database: z
    .string({ error: 'must be data, otel or a database name' })
    .regex(DATABASE_NAME, { error: 'must be data, otel or a database name matching ^[A-Za-z0-9_-]+$' })
    .optional(),
  sql: z.string({ error: 'must be a string of SQL' }).trim().min(1, { error: 'must not be empty' }).optional(),
  builtin: z.enum(BUILTINS, { error: `must be one of: ${BUILTINS.join(', ')}` }).optional(),
  params: z
    .array(paramName, { error: 'must be a list of parameter names' })
    .refine((names) => new Set(names).size === names.length, { error: 'lists a parameter twice' })
    .optional(),
  binds: z
    .record(z.string().regex(PARAM_NAME, { error: 'bind names must be identifiers ([A-Za-z_][A-Za-z0-9_]*)' }), bindValue, {
      error: 'must be a map of name: value (or null to clear the binds a previous file set)',
    })
    .nullable()
    .optional(),
  result_field: z
    .union(
      [
        z.number().int({ error: RESULT_FIELD }).nonnegative({ error: RESULT_FIELD }),
        z.string().min(1, { error: RESULT_FIELD }),
      ],
      { error: RESULT_FIELD },
    )
    .optional(),
  clamp_min: servable(finite()).nullable().optional(),
  clamp_max: servable(finite()).nullable().optional(),
  cold_hold: servable(nonNegative).optional(),
  timeout_seconds: positive.optional(),
  metric_type: z.enum(['AverageValue', 'Value'], { error: 'must be AverageValue or Value' }).optional(),
  deadline_ms: positive.optional(),
  fresh_for_seconds: nonNegative.optional(),
  max_stale_seconds: positive.nullable().optional(),
  enabled: z.boolean({ error: 'must be true or false' }).optional(),
  batch: batchSchema.nullable().optional(),
});

export type RawQuery = z.output<typeof rawQuerySchema>;
export const RAW_QUERY_KEYS: readonly string[] = Object.freeze(Object.keys(rawQuerySchema.shape));
export const BATCH_KEYS: readonly string[] = Object.freeze(Object.keys(batchSchema.shape));
