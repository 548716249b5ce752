import type { Logger } from '../log.js';
import { rootSampling, tracingSettings, type SamplerSettings, type TracingSettings } from './settings.js';
import { syncContextManager } from './sync-context.js';
import { setTraceApi } from './trace.js';

/**
 * Starts OpenTelemetry tracing when an OTLP endpoint is set (settings.ts),
 * before the program starts: a tracer provider (OTLP/HTTP protobuf exporter,
 * batched), the W3C propagator and async-local context. Without an endpoint it
 * loads nothing: every module of OpenTelemetry is imported dynamically, here,
 * only when on.
 *
 * `@opentelemetry/sdk-trace-node` rather than `@opentelemetry/sdk-node`: the
 * latter brings every signal and exporter (metrics, logs, gRPC, Zipkin) and
 * takes the production install past its 50 MB goal (docs/performance.md).
 */
export interface Telemetry {
  /** The settings it runs with; undefined when off. */
  readonly settings: TracingSettings | undefined;
  /** Exports what is buffered now (tests, benches). */
  flush(): Promise<void>;
  /** Exports what is buffered (bounded by the exporter's timeout), then turns tracing off. */
  shutdown(): Promise<void>;
}

export interface StartTelemetryOptions {
  /** OTEL_SERVICE_NAME's default: the program (`dfe-keda-shim`, `dfe-hunt-runner`, `dfe-demo`). */
  readonly serviceName: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Where the SDK's own problems (an unreachable collector) are written, at warn; made only when tracing is on. */
  readonly logger?: () => Logger;
  /**
   * How a span stays current: `async` (default) across awaits, through
   * `AsyncLocalStorage` (the runner, the demo); `sync` only for the synchronous
   * extent of a call, without async hooks (the shim's hot path, sync-context.ts).
   */
  readonly context?: 'async' | 'sync';
}

const OFF: Telemetry = Object.freeze({ settings: undefined, flush: async () => undefined, shutdown: async () => undefined });

let current: Telemetry = OFF;

export async function startTelemetry(options: StartTelemetryOptions): Promise<Telemetry> {
  const settings = tracingSettings(options.env ?? process.env, options.serviceName);
  if (settings === undefined) return OFF;
  if (current !== OFF) throw new Error('tracing is already started in this process');
  const [api, core, sdk, resources, exporter] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const logger = options.logger?.();
  if (logger !== undefined) {
    const warn = (message: string, ...args: unknown[]) => logger.warn({ otel: args.length > 0 ? args : undefined }, `opentelemetry: ${message}`);
    const quiet = () => undefined;
    api.diag.setLogger({ error: warn, warn, info: quiet, debug: quiet, verbose: quiet }, api.DiagLogLevel.WARN);
  }
  // The program's name, then OTEL_RESOURCE_ATTRIBUTES (k8s.pod.name=…) from the process
  // environment, then OTEL_SERVICE_NAME, which wins over both.
  const named = settings.serviceName === options.serviceName ? {} : { 'service.name': settings.serviceName };
  const resource = resources
    .resourceFromAttributes({ 'service.name': options.serviceName })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(resources.resourceFromAttributes(named));
  const provider = new sdk.NodeTracerProvider({
    resource,
    sampler: withRootsDecided(api, sdk, configuredSampler(sdk, settings.sampler)),
    // OTEL_BSP_* (queue size, delay, batch size) are read by the processor itself.
    spanProcessors: [new sdk.BatchSpanProcessor(new exporter.OTLPTraceExporter({ url: settings.tracesUrl }))],
  });
  const contextManager = options.context === 'sync' ? syncContextManager(api.ROOT_CONTEXT) : undefined;
  provider.register({ propagator: new core.W3CTraceContextPropagator(), ...(contextManager ? { contextManager } : {}) });
  setTraceApi({ api, tracer: provider.getTracer('dfe-keda-shim'), sampleRoot: rootSampling(settings.sampler) });
  let stopped: Promise<void> | undefined;
  const running: Telemetry = {
    settings,
    flush: () => provider.forceFlush(),
    shutdown: () =>
      (stopped ??= (async () => {
        setTraceApi(undefined);
        try {
          await provider.shutdown();
        } finally {
          api.trace.disable();
          api.propagation.disable();
          api.context.disable();
          if (current === running) current = OFF;
        }
      })()),
  };
  current = running;
  return running;
}

type Sdk = typeof import('@opentelemetry/sdk-trace-node');
type Sampler = import('@opentelemetry/sdk-trace-node').Sampler;

/**
 * The SDK's sampler: a root reaches the SDK only when trace.ts has already
 * sampled it (settings.ts rootSampling), so it is recorded; a span under a
 * span of this process follows its parent, so a sampled poll keeps its
 * ClickHouse span; under a caller's `traceparent`, the configured sampler
 * decides (parent-based: the caller's flag).
 */
function withRootsDecided(api: typeof import('@opentelemetry/api'), sdk: Sdk, configured: Sampler): Sampler {
  const sampled = { decision: sdk.SamplingDecision.RECORD_AND_SAMPLED };
  const dropped = { decision: sdk.SamplingDecision.NOT_RECORD };
  return {
    shouldSample(context, traceId, name, kind, attributes, links) {
      const parent = api.trace.getSpanContext(context);
      if (parent === undefined || !api.isSpanContextValid(parent)) return sampled;
      if (parent.isRemote !== true) return (parent.traceFlags & api.TraceFlags.SAMPLED) === 0 ? dropped : sampled;
      return configured.shouldSample(context, traceId, name, kind, attributes, links);
    },
    toString: () => `RootsDecidedByDfe{parented=${configured.toString()}}`,
  };
}

function configuredSampler(sdk: Sdk, settings: SamplerSettings): Sampler {
  switch (settings.name) {
    case 'always_on':
      return new sdk.AlwaysOnSampler();
    case 'always_off':
      return new sdk.AlwaysOffSampler();
    case 'traceidratio':
      return new sdk.TraceIdRatioBasedSampler(settings.ratio);
    case 'parentbased_always_on':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(settings.ratio) });
  }
}

/**
 * A program's start with tracing around it (the CLIs): telemetry first, so the
 * program's first span already exports; the program's close, then a flush of
 * the last spans. A start that fails turns tracing off again.
 */
export async function withTelemetry<R extends { close(): Promise<void> }>(options: StartTelemetryOptions, start: () => Promise<R>): Promise<R> {
  const telemetry = await startTelemetry(options);
  let running: R;
  try {
    running = await start();
  } catch (err) {
    await telemetry.shutdown();
    throw err;
  }
  if (telemetry.settings === undefined) return running;
  const close = running.close.bind(running);
  return Object.assign(running, { close: () => close().finally(() => telemetry.shutdown()) });
}
