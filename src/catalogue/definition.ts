import { BATCH_DEFAULTS, QUERY_DEFAULTS, type BatchDefinition, type CatalogueWarning, type QueryDefinition } from './types.js';
import { catalogueInvalid } from './errors.js';
import type { MergedQuery } from './merge.js';
import type { Builtin, RawQuery } from './schema.js';
import { SENTINELS, unknownSentinels } from './sentinels.js';

/** Where a query's SQL comes from, once the merge settled it. */
export type QuerySource = { readonly kind: 'sql'; readonly sql: string } | { readonly kind: 'builtin'; readonly builtin: Builtin };

export interface CheckedQuery {
  readonly definition: QueryDefinition;
  readonly source: QuerySource;
  readonly warnings: readonly CatalogueWarning[];
}

/**
 * KEDA's default HTTP timeout for a metrics-api trigger (KEDA_HTTP_DEFAULT_TIMEOUT,
 * or the trigger's own `timeout` metadata since KEDA 2.20). A deadline at or
 * past it means KEDA gives up before the shim answers from its cache.
 */
export const KEDA_DEFAULT_HTTP_TIMEOUT_MS = 3000;

function deadlineWarnings(q: MergedQuery, deadlineMs: number): CatalogueWarning[] {
  if (deadlineMs < KEDA_DEFAULT_HTTP_TIMEOUT_MS) return [];
  const file = q.origin.deadline_ms ?? q.file;
  return [
    {
      file,
      query: q.name,
      key: 'deadline_ms',
      value: deadlineMs,
      message:
        `${file}: query ${JSON.stringify(q.name)} key "deadline_ms": ${deadlineMs} is at or above KEDA's default HTTP timeout ` +
        `(${KEDA_DEFAULT_HTTP_TIMEOUT_MS} ms): KEDA times out before the shim answers from its cache. Lower it, or raise the ` +
        "trigger's `timeout` metadata (KEDA ≥ 2.20) or KEDA_HTTP_DEFAULT_TIMEOUT above it",
    },
  ];
}

/** `database` when the YAML leaves it out. */
export const DEFAULT_DATABASE = 'data';

type Key = keyof RawQuery;

/** A problem with one key of the merged query, naming the file that set it. */
function fail(q: MergedQuery, key: Key, problem: string, value?: unknown) {
  return catalogueInvalid({ file: q.origin[key] ?? q.file, query: q.name, key, ...(value === undefined ? {} : { value }), problem });
}

/**
 * Of two clashing keys, the one to blame: the one set by the later file (the
 * override, which caused the clash); a key set nowhere (a default) never.
 */
function laterOf(q: MergedQuery, a: Key, b: Key): Key {
  const rank = (key: Key) => (q.origin[key] === undefined ? -1 : q.origin[key] === q.file ? 1 : 0);
  return rank(b) > rank(a) ? b : a;
}

function sourceOf(q: MergedQuery): QuerySource {
  const { sql, builtin } = q.raw;
  if (sql !== undefined && builtin !== undefined) throw fail(q, 'builtin', 'cannot be set together with sql in one query (choose one)', builtin);
  if (builtin !== undefined) return { kind: 'builtin', builtin };
  if (sql === undefined) throw catalogueInvalid({ file: q.file, query: q.name, key: 'sql', problem: 'is missing: a query needs sql or builtin' });
  const unknown = unknownSentinels(sql);
  if (unknown.length > 0) throw fail(q, 'sql', `uses unknown sentinel ${unknown.join(', ')} (known: ${SENTINELS.join(', ')})`);
  return { kind: 'sql', sql };
}

function checkClamp(q: MergedQuery): void {
  const { clamp_min: min, clamp_max: max } = q.raw;
  if (min == null || max == null || min <= max) return;
  throw laterOf(q, 'clamp_min', 'clamp_max') === 'clamp_min'
    ? fail(q, 'clamp_min', `is greater than clamp_max ${max}`, min)
    : fail(q, 'clamp_max', `is less than clamp_min ${min}`, max);
}

/** The answer must be out (from the cache) before ClickHouse's own limit ends the query. */
function checkDeadline(q: MergedQuery, deadlineMs: number, timeoutSeconds: number): void {
  if (deadlineMs < timeoutSeconds * 1000) return;
  const isDefault = (key: Key) => (q.raw[key] === undefined ? ', the default' : '');
  throw laterOf(q, 'deadline_ms', 'timeout_seconds') === 'deadline_ms'
    ? fail(q, 'deadline_ms', `must be less than timeout_seconds × 1000 (${timeoutSeconds * 1000} ms${isDefault('timeout_seconds')})`, deadlineMs)
    : fail(q, 'timeout_seconds', `must be more than deadline_ms / 1000 (deadline_ms ${deadlineMs}${isDefault('deadline_ms')})`, timeoutSeconds);
}

/** A problem with one key of the `batch:` block (`batch.param`, …), naming the file that set the block. */
function failBatch(q: MergedQuery, key: string, problem: string, value?: unknown) {
  return catalogueInvalid({ file: q.origin['batch'] ?? q.file, query: q.name, key: `batch.${key}`, ...(value === undefined ? {} : { value }), problem });
}

/** The batch block, checked against the rest of the query; its SQL is compiled later (compile.ts). */
function batchOf(q: MergedQuery, params: readonly string[], deadlineMs: number): BatchDefinition | undefined {
  const raw = q.raw.batch;
  if (raw === undefined || raw === null) return undefined;
  if (raw.param === undefined) throw failBatch(q, 'param', 'is missing: name the declared param whose values are batched');
  if (!params.includes(raw.param)) throw failBatch(q, 'param', `is not a declared param of the query (params: ${params.length > 0 ? params.join(', ') : 'none'})`, raw.param);
  if (raw.sql === undefined) throw failBatch(q, 'sql', 'is missing: the SQL that answers many keys at once');
  const windowMs = raw.window_ms ?? BATCH_DEFAULTS.windowMs;
  if (windowMs >= deadlineMs) throw failBatch(q, 'window_ms', `must be less than deadline_ms (${deadlineMs} ms)`, windowMs);
  const unknown = unknownSentinels(raw.sql);
  if (unknown.length > 0) throw failBatch(q, 'sql', `uses unknown sentinel ${unknown.join(', ')} (known: ${SENTINELS.join(', ')})`);
  return { param: raw.param, maxSize: raw.max_size ?? BATCH_DEFAULTS.maxSize, windowMs, sql: raw.sql };
}

/**
 * The rules that span keys (docs/catalogue.md#validation), checked on the MERGED query, then the
 * defaults (QUERY_DEFAULTS) applied.
 */
export function checkQuery(q: MergedQuery): CheckedQuery {
  const raw = q.raw;
  const source = sourceOf(q);
  checkClamp(q);
  const timeoutSeconds = raw.timeout_seconds ?? QUERY_DEFAULTS.timeoutSeconds;
  const deadlineMs = raw.deadline_ms ?? QUERY_DEFAULTS.deadlineMs;
  checkDeadline(q, deadlineMs, timeoutSeconds);
  const definition: QueryDefinition = {
    name: q.name,
    database: raw.database ?? DEFAULT_DATABASE,
    params: Object.freeze([...(raw.params ?? [])]),
    binds: Object.freeze({ ...(raw.binds ?? {}) }),
    resultField: raw.result_field ?? QUERY_DEFAULTS.resultField,
    clampMin: raw.clamp_min ?? undefined,
    clampMax: raw.clamp_max ?? undefined,
    coldHold: raw.cold_hold ?? QUERY_DEFAULTS.coldHold,
    timeoutSeconds,
    metricType: raw.metric_type ?? QUERY_DEFAULTS.metricType,
    deadlineMs,
    freshForSeconds: raw.fresh_for_seconds ?? QUERY_DEFAULTS.freshForSeconds,
    maxStaleSeconds: raw.max_stale_seconds === undefined ? QUERY_DEFAULTS.maxStaleSeconds : raw.max_stale_seconds,
  };
  const batch = batchOf(q, definition.params, deadlineMs);
  if (batch !== undefined) return { definition: { ...definition, batch }, source, warnings: deadlineWarnings(q, deadlineMs) };
  return { definition, source, warnings: deadlineWarnings(q, deadlineMs) };
}
