import type { ClickHouseClient } from '@clickhouse/client';
import { failSpan, hasCurrentSpan, startChildSpan, traceHeaders, withSpan, type Attributes } from '../telemetry/trace.js';

/**
 * A ClickHouse query as a client span (docs/operations.md#traces), with the
 * database semantic conventions: `db.system.name`, `db.query.text` (the SQL
 * as sent, whose values travel apart as query parameters, so the text holds
 * none), `db.operation.name`, `server.address`/`server.port`. A server gets
 * the span's W3C `traceparent` in the HTTP request, so its own spans land in
 * `system.opentelemetry_span_log` under the same trace. The embedded engine
 * has no HTTP: the span exists there too, with nothing to propagate into.
 * A query is traced only under a current span (a sampled poll, a hunt run).
 */
export interface QuerySpec {
  /** Low-cardinality span name part: the catalogue query, the hunt. */
  readonly name: string;
  readonly operation: string;
  readonly text: string;
  readonly attributes?: Attributes;
}

/** How a finished query reads on its span: a failure's one-line reason, or nothing. */
export type QueryVerdict<T> = (result: T) => string | undefined;

/** Clients without an HTTP request to carry headers (the embedded engine's), registered by embedded.ts. */
const noHttp = new WeakSet<ClickHouseClient>();

export function markWithoutHttp(client: ClickHouseClient): void {
  noHttp.add(client);
}

/** Where a server client points, for `server.address`/`server.port`: registered by client.ts. */
const servers = new WeakMap<ClickHouseClient, Attributes>();

export function markServer(client: ClickHouseClient, url: string): void {
  const parsed = new URL(url);
  const port = parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port);
  servers.set(client, { 'server.address': parsed.hostname, 'server.port': port });
}

/**
 * Runs `run` inside the query's span. `run` gets the headers to send with the
 * request (undefined when tracing is off, the span unsampled or the engine
 * embedded); `verdict` says whether the settled result is a failure. `spec`
 * may be a function: it is called only when a span is made (an untraced
 * query, nearly every one, builds no attributes).
 */
export function tracedQuery<T>(
  client: ClickHouseClient,
  spec: QuerySpec | (() => QuerySpec),
  run: (headers: Record<string, string> | undefined) => Promise<T>,
  verdict: QueryVerdict<T>,
): Promise<T> {
  if (!hasCurrentSpan()) return run(undefined);
  return runInSpan(client, typeof spec === 'function' ? spec() : spec, run, verdict);
}

async function runInSpan<T>(
  client: ClickHouseClient,
  spec: QuerySpec,
  run: (headers: Record<string, string> | undefined) => Promise<T>,
  verdict: QueryVerdict<T>,
): Promise<T> {
  const span = startChildSpan(`${spec.operation} ${spec.name}`, 'client', {
    'db.system.name': 'clickhouse',
    'db.operation.name': spec.operation,
    'db.query.text': spec.text,
    ...servers.get(client),
    ...spec.attributes,
  });
  if (span === undefined) return run(undefined);
  try {
    const result = await withSpan(span, () => run(noHttp.has(client) ? undefined : traceHeaders()));
    const failure = verdict(result);
    if (failure !== undefined) failSpan(span, failure);
    return result;
  } catch (err) {
    failSpan(span, failureKind(err));
    throw err;
  } finally {
    span.end();
  }
}

/**
 * A failure's kind for the span status: ClickHouse's error name (`UNKNOWN_TABLE`) or code, else
 * the error class. Never the message, which may quote a value.
 */
function failureKind(err: unknown): string {
  const { type, code, name } = (err ?? {}) as { type?: unknown; code?: unknown; name?: unknown };
  if (typeof type === 'string' && type !== '') return type;
  if (typeof code === 'string' && code !== '') return `code ${code}`;
  return typeof name === 'string' ? name : 'failed';
}
