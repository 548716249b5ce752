import type { Attributes, Context, Span, SpanKind } from '@opentelemetry/api';

/**
 * What every layer uses to trace: spans, attributes on the current span, the
 * W3C headers of the current span, the ids for a log line. Type imports only:
 * until start.ts has loaded the SDK (an endpoint is set) every function here
 * is a no-op on a null check, and no OpenTelemetry module is in the process.
 */
export type { Attributes, Span } from '@opentelemetry/api';

/** The parts of `@opentelemetry/api` used here, handed over by start.ts once loaded. */
export interface TraceApi {
  readonly trace: typeof import('@opentelemetry/api').trace;
  readonly context: typeof import('@opentelemetry/api').context;
  readonly propagation: typeof import('@opentelemetry/api').propagation;
  readonly SpanKind: typeof import('@opentelemetry/api').SpanKind;
  readonly SpanStatusCode: typeof import('@opentelemetry/api').SpanStatusCode;
  readonly TraceFlags: typeof import('@opentelemetry/api').TraceFlags;
}

interface Active {
  readonly api: TraceApi;
  readonly tracer: import('@opentelemetry/api').Tracer;
  /**
   * Whether a new root span is sampled (settings.ts rootSampling): asked before
   * a root is made, so an unsampled one is never made at all. The SDK's own
   * sampler then takes every root it is given (start.ts).
   */
  readonly sampleRoot: () => boolean;
}

let active: Active | undefined;

/** start.ts only: tracing on (or off again after shutdown). */
export function setTraceApi(next: Active | undefined): void {
  active = next;
}

export function tracingOn(): boolean {
  return active !== undefined;
}

export type Kind = 'server' | 'client' | 'internal';

function kindOf(api: TraceApi, kind: Kind): SpanKind {
  return kind === 'server' ? api.SpanKind.SERVER : kind === 'client' ? api.SpanKind.CLIENT : api.SpanKind.INTERNAL;
}

/**
 * Whether a span under `parent` may be made: always under a parent span (the
 * SDK decides), else only when the root is sampled. An unsampled root is no
 * span at all: no trace id, no object, nothing made current.
 */
function admits(current: Active, parent: Context): boolean {
  return current.api.trace.getSpan(parent) !== undefined || current.sampleRoot();
}

/**
 * A span under the current one (a root span when there is none); undefined
 * when tracing is off or a root is not sampled.
 */
export function startSpan(name: string, kind: Kind, attributes: Attributes): Span | undefined {
  if (active === undefined) return undefined;
  const parent = active.api.context.active();
  if (!admits(active, parent)) return undefined;
  return active.tracer.startSpan(name, { kind: kindOf(active.api, kind), attributes }, parent);
}

/**
 * A span only as the child of a current span, else undefined: a ClickHouse
 * query of a poll that was not sampled (whose span is not made current) gets
 * no span of its own, rather than a root of its own.
 */
export function startChildSpan(name: string, kind: Kind, attributes: Attributes): Span | undefined {
  if (!hasCurrentSpan() || active === undefined) return undefined;
  return active.tracer.startSpan(name, { kind: kindOf(active.api, kind), attributes });
}

/** Whether startChildSpan would make a span: tracing is on and a span is current (checked before building attributes). */
export function hasCurrentSpan(): boolean {
  return active !== undefined && active.api.trace.getActiveSpan() !== undefined;
}

/**
 * The server span of an incoming request: the child of the caller's W3C
 * `traceparent` when it sent one (KEDA does not), else a root, made only when
 * sampled (undefined otherwise).
 */
export function startServerSpan(name: string, attributes: Attributes, headers: Readonly<Record<string, unknown>>): Span | undefined {
  if (active === undefined) return undefined;
  const { api, tracer } = active;
  const parent = headers.traceparent === undefined ? api.context.active() : api.propagation.extract(api.context.active(), headers);
  if (!admits(active, parent)) return undefined;
  return tracer.startSpan(name, { kind: api.SpanKind.SERVER, attributes }, parent);
}

/** Runs `fn` with `span` as the current span (so children and log lines see it); just `fn()` without one. */
export function withSpan<T>(span: Span | undefined, fn: () => T): T {
  if (active === undefined || span === undefined) return fn();
  const { api } = active;
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
}

/** Marks a span failed with a one-line reason (its status; the text is ours, never a value or a credential). */
export function failSpan(span: Span | undefined, message: string): void {
  if (active === undefined || span === undefined) return;
  span.setStatus({ code: active.api.SpanStatusCode.ERROR, message });
}

/** Marks the current span failed (a hunt run whose statement failed). */
export function failCurrentSpan(message: string): void {
  if (active === undefined) return;
  failSpan(active.api.trace.getActiveSpan(), message);
}

/** Attributes on the current span (the poll's, the hunt run's); nothing when tracing is off or no span is current. */
export function annotate(attributes: Attributes): void {
  recordingSpan()?.setAttributes(attributes);
}

/**
 * The current span if it records (is sampled), else undefined: a caller on a
 * hot path builds its attributes only for the polls that are exported.
 */
export function recordingSpan(): Span | undefined {
  if (active === undefined) return undefined;
  const span = active.api.trace.getActiveSpan();
  return span?.isRecording() === true ? span : undefined;
}

function sampledContext(): { traceId: string; spanId: string; context: Context } | undefined {
  if (active === undefined) return undefined;
  const { api } = active;
  const context = api.context.active();
  const span = api.trace.getSpan(context);
  if (span === undefined) return undefined;
  const sc = span.spanContext();
  // An unsampled span's trace is exported nowhere: naming it would send a reader looking for nothing.
  if ((sc.traceFlags & api.TraceFlags.SAMPLED) === 0) return undefined;
  return { traceId: sc.traceId, spanId: sc.spanId, context };
}

/** The W3C `traceparent` (and `tracestate`) of the current span, when it is sampled; else undefined. */
export function traceHeaders(): Record<string, string> | undefined {
  const current = sampledContext();
  if (current === undefined || active === undefined) return undefined;
  const headers: Record<string, string> = {};
  active.api.propagation.inject(current.context, headers);
  return headers;
}

/**
 * Fields for a log line (pino mixin, src/log.ts): `trace_id`, `span_id` of the
 * current sampled span. A new object each time: pino merges the line into it.
 */
export function traceLogFields(): Record<string, string> {
  const current = sampledContext();
  return current === undefined ? {} : { trace_id: current.traceId, span_id: current.spanId };
}
