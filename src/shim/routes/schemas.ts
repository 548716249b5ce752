/**
 * The JSON schemas of the routes, each fact once: Fastify compiles them at
 * startup (Ajv for querystrings, fast-json-stringify for responses), and
 * /openapi.json publishes the same objects (routes/openapi.ts).
 */

/**
 * The 200 body of a query route. As a response schema it becomes a
 * fast-json-stringify serialiser, compiled once: the same bytes as
 * JSON.stringify of the handler's object (the same keys in the same order;
 * the numbers are finite, docs/performance.md), without a walk per answer.
 * fast-json-stringify writes only the listed properties and ignores the
 * validation keywords (`enum`, `minimum`), which are for readers.
 */
export const ANSWER_SCHEMA = {
  type: 'object',
  required: ['value', 'source', 'age_seconds'],
  properties: {
    value: { type: 'number', description: 'The metric value KEDA reads (valueLocation: value).' },
    source: { type: 'string', enum: ['fresh', 'last_good', 'cold_hold', 'hold'] },
    age_seconds: { type: 'number', minimum: 0 },
  },
} as const;

/**
 * Every error body, `{error, query}` (docs/api.md#answers). Published in
 * /openapi.json but NOT a response schema of the routes: errors are rare, the
 * error handler (error-handler.ts) owns this body, and a serialiser schema
 * would silently drop any field added there.
 */
export const ERROR_SCHEMA = {
  type: 'object',
  required: ['error', 'query'],
  properties: { error: { type: 'string' }, query: { type: 'string', nullable: true } },
} as const;

/** `/livez` and `/readyz` (200 and 503 alike). */
export const PROBE_SCHEMA = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string' } },
} as const;
