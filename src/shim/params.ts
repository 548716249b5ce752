import type { CompiledQuery } from '../catalogue/types.js';
import { DfeError, showValue } from '../errors.js';
import type { DeclaredParams } from './key.js';
import { isServable, MAX_SERVABLE } from './value.js';

/** docs/api.md#answers: 1–253 chars of `[A-Za-z0-9_.:-]` (a Kubernetes name fits). */
export const PARAM_VALUE = /^[A-Za-z0-9_.:-]{1,253}$/;

export { RESERVED_PARAMS } from '../catalogue/schema.js';

const NO_PARAMS: DeclaredParams = Object.freeze({});

/** A request's query string as Fastify parses it. */
export type RawQueryString = Readonly<Record<string, unknown>>;

/**
 * The declared params of `query`, validated. All are required; undeclared ones
 * are ignored. A bad or missing value is a PARAM_INVALID (HTTP 400) and never
 * reaches ClickHouse.
 */
export function validateParams(query: CompiledQuery, raw: RawQueryString): DeclaredParams {
  if (query.params.length === 0) return NO_PARAMS;
  const out: Record<string, string> = {};
  for (const name of query.params) {
    const value = raw[name];
    if (value === undefined) {
      throw new DfeError('PARAM_INVALID', `missing required parameter ${name}`, { query: query.name, key: name });
    }
    if (typeof value !== 'string' || !PARAM_VALUE.test(value)) {
      throw new DfeError(
        'PARAM_INVALID',
        `parameter ${name}=${showValue(value)} must be 1-253 characters of [A-Za-z0-9_.:-] (given once)`,
        { query: query.name, key: name, value },
      );
    }
    out[name] = value;
  }
  return Object.freeze(out);
}

/** The text a `hold` (and gRPC's target values) may be: a plain decimal number, no sign. */
export const HOLD_TEXT = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/**
 * The request parameters as /openapi.json publishes them, from the same facts
 * the checks below use: a declared param's pattern, `hold`'s range. The routes
 * have no querystring schema: these checks are the one validation.
 */
export function declaredParamDoc(name: string): Record<string, unknown> {
  return { name, in: 'query', required: true, schema: { type: 'string', pattern: PARAM_VALUE.source } };
}

export const HOLD_PARAM_DOC = Object.freeze({
  name: 'hold',
  in: 'query',
  required: false,
  description: 'The trigger target, a plain decimal number: answered when ClickHouse fails and the query is metric_type Value.',
  schema: { type: 'number', minimum: 0, maximum: MAX_SERVABLE },
});

/**
 * The `hold` target of a `metric_type: Value` trigger (docs/failsafe.md#metric_type-value-and-hold): absent, or a
 * number ≥ 0 inside the servable range (docs/failsafe.md#servable-range). Anything else is a
 * 400 — a typo in a ScaledObject must show, not silently fall back to
 * last-good, and a target KEDA cannot carry must never be served.
 */
export function parseHold(query: CompiledQuery, raw: RawQueryString): number | undefined {
  const value = raw.hold;
  if (value === undefined) return undefined;
  if (typeof value === 'string' && HOLD_TEXT.test(value)) {
    const n = Number(value);
    if (isServable(n)) return n;
  }
  throw new DfeError('PARAM_INVALID', `hold=${showValue(value)} must be a number from 0 to ${MAX_SERVABLE} (the trigger's target)`, {
    query: query.name,
    key: 'hold',
    value,
  });
}
