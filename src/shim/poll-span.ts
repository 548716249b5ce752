import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { failSpan, startServerSpan, withSpan, type Span } from '../telemetry/trace.js';

/**
 * One server span per poll (docs/operations.md#traces), added by app.ts when
 * tracing is on: `GET /keda/hunt-backlog` with `http.route`,
 * `http.request.method`, `url.path` (the path only: in apiKey mode the query
 * string carries the key) and `http.response.status_code`. It wraps each
 * route's handler: a sampled poll's span is current while the handler runs,
 * so the cache decision (answer-trace.ts) and the ClickHouse query's span land
 * on it; it ends when the answer's head is written (endAtHead). An unsampled
 * poll (99 % by default) costs one random draw (trace.ts): no span is made, and
 * its query gets no span, as a parent-based sampler would decide anyway. No
 * hook: a hook runs on every request, sampled or not.
 *
 * Not `@fastify/otel`: it makes every request's span current whether sampled
 * or not (a third more CPU per cached poll, docs/performance.md) and records
 * `url.path` with the query string.
 */
/** Polled every few seconds by probes and Prometheus, with nothing to see in a trace. */
const UNTRACED_ROUTES = new Set(['/livez', '/readyz', '/metrics']);

function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

export function tracePolls(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (UNTRACED_ROUTES.has(route.url)) return;
    const handler = route.handler;
    const name = `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`;
    const attributes = { 'http.route': route.url };
    route.handler = function tracedHandler(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      const span = startServerSpan(name, attributes, request.headers);
      if (span === undefined || !span.isRecording()) return handler.call(this, request, reply);
      span.setAttributes({ 'http.request.method': request.method, 'url.path': pathOf(request.url) });
      endAtHead(span, reply);
      return withSpan(span, () => handler.call(this, request, reply));
    };
  });
}

type WriteHead = ServerResponse['writeHead'];

/**
 * Ends a sampled poll's span with its status code when the answer's head is
 * written, as Fastify's onSend hooks end: this poll's response gets a writeHead
 * of its own, which hands over to its class's (closing-response.ts) once run.
 */
function endAtHead(span: Span, reply: FastifyReply): void {
  const res: ServerResponse = reply.raw;
  res.writeHead = function writeHead(...args: Parameters<WriteHead>) {
    Reflect.deleteProperty(res, 'writeHead');
    span.setAttribute('http.response.status_code', reply.statusCode);
    if (reply.statusCode >= 500) failSpan(span, `HTTP ${reply.statusCode}`);
    span.end();
    return res.writeHead(...args);
  } as WriteHead;
}
