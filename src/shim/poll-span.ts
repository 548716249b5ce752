import type { FastifyInstance, FastifyRequest } from 'fastify';
import { failSpan, startServerSpan, withSpan, type Span } from '../telemetry/trace.js';

/**
 * One server span per poll (docs/operations.md#traces), added by app.ts when
 * tracing is on: `GET /keda/hunt-backlog` with `http.route`,
 * `http.request.method`, `url.path` (the path only: in apiKey mode the query
 * string carries the key) and `http.response.status_code`. A sampled poll's
 * span is made current for the rest of the request, so the cache decision
 * (answer-trace.ts) and the ClickHouse query's span land on it. An unsampled
 * poll (99 % by default) is left alone: no context switch, and its query gets
 * no span, as a parent-based sampler would decide anyway.
 *
 * Not `@fastify/otel`: it makes every request's span current whether sampled
 * or not (a third more CPU per cached poll, docs/performance.md) and records
 * `url.path` with the query string.
 */
const kSpan = Symbol('dfe.pollSpan');

type TracedRequest = FastifyRequest & { [kSpan]?: Span };

/** Polled every few seconds by probes and Prometheus, with nothing to see in a trace. */
const UNTRACED_PATHS = new Set(['/livez', '/readyz', '/metrics']);

function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

export function tracePolls(app: FastifyInstance): void {
  app.decorateRequest(kSpan, undefined);
  app.addHook('onRequest', (request: TracedRequest, _reply, done) => {
    const path = pathOf(request.url);
    if (UNTRACED_PATHS.has(path)) return done();
    const route = request.routeOptions.url;
    const span = startServerSpan(route === undefined ? request.method : `${request.method} ${route}`, {}, request.headers);
    if (span === undefined || !span.isRecording()) return done();
    span.setAttributes({ 'http.request.method': request.method, 'url.path': path, ...(route === undefined ? {} : { 'http.route': route }) });
    request[kSpan] = span;
    withSpan(span, done);
  });
  app.addHook('onResponse', (request: TracedRequest, reply, done) => {
    const span = request[kSpan];
    if (span !== undefined) {
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) failSpan(span, `HTTP ${reply.statusCode}`);
      span.end();
    }
    done();
  });
}
