import { DfeError, showValue } from '../errors.js';

/**
 * Tracing is configured only by the standard OTEL_* variables
 * (docs/operations.md#traces). Without an OTLP endpoint it is off and nothing
 * of OpenTelemetry is loaded. This file is pure: environment → settings.
 */
export type SamplerName =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

export interface SamplerSettings {
  readonly name: SamplerName;
  /** The ratio of the `*traceidratio` samplers, 0..1. */
  readonly ratio: number;
}

export interface TracingSettings {
  /** Where spans are POSTed (OTLP/HTTP, protobuf). */
  readonly tracesUrl: string;
  /** OTEL_SERVICE_NAME, else the program's own name. */
  readonly serviceName: string;
  readonly sampler: SamplerSettings;
}

/**
 * KEDA sends no `traceparent`, so every poll is a root span: an always-on
 * sampler would export every poll of every ScaledObject (one per few seconds,
 * forever). Unset, the sampler is parent-based (a caller's sampled trace is
 * kept whole) over a 1 % trace-id ratio for the roots.
 */
export const DEFAULT_SAMPLER: SamplerSettings = Object.freeze({ name: 'parentbased_traceidratio', ratio: 0.01 });

/**
 * Whether a new root span is sampled (a poll: KEDA sends no `traceparent`; a
 * hunt run), decided by trace.ts before any span object or trace id is made,
 * so the 99 % of polls that are not sampled cost one random draw
 * (docs/operations.md#traces). Same odds as the SDK's trace-id ratio sampler
 * for a fresh trace id; spans with a parent are still decided by the SDK
 * (start.ts). `random` is injectable for tests.
 */
export function rootSampling(sampler: SamplerSettings, random: () => number = Math.random): () => boolean {
  switch (sampler.name) {
    case 'always_on':
    case 'parentbased_always_on':
      return () => true;
    case 'always_off':
    case 'parentbased_always_off':
      return () => false;
    case 'traceidratio':
    case 'parentbased_traceidratio': {
      const { ratio } = sampler;
      if (ratio >= 1) return () => true;
      if (ratio <= 0) return () => false;
      return () => random() < ratio;
    }
  }
}

/** The OTLP/HTTP path of traces under OTEL_EXPORTER_OTLP_ENDPOINT (the OTLP exporter spec). */
const TRACES_PATH = 'v1/traces';

function set(env: NodeJS.ProcessEnv, key: string): string | undefined {
  const value = env[key]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function invalid(key: string, value: string, why: string): DfeError {
  return new DfeError('CONFIG_INVALID', `invalid ${key}=${showValue(value)}: ${why}`, { key, value });
}

function httpUrl(key: string, value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(key, value, 'not a URL (e.g. http://otel-collector:4318)');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(key, value, 'only http:// and https:// (OTLP/HTTP) are supported');
  return url;
}

function tracesUrl(env: NodeJS.ProcessEnv): string | undefined {
  const traces = set(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (traces !== undefined) return httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces).href;
  const base = set(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (base === undefined) return undefined;
  const url = httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', base);
  return new URL(url.pathname.endsWith('/') ? TRACES_PATH : `${url.pathname}/${TRACES_PATH}`, url).href;
}

function sampler(env: NodeJS.ProcessEnv): SamplerSettings {
  const name = set(env, 'OTEL_TRACES_SAMPLER');
  const arg = set(env, 'OTEL_TRACES_SAMPLER_ARG');
  let ratio: number | undefined;
  if (arg !== undefined) {
    ratio = Number(arg);
    if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) throw invalid('OTEL_TRACES_SAMPLER_ARG', arg, 'a ratio between 0 and 1 (0.01 = 1 %)');
  }
  if (name === undefined) return { name: DEFAULT_SAMPLER.name, ratio: ratio ?? DEFAULT_SAMPLER.ratio };
  const known = SAMPLERS.find((s) => s === name.toLowerCase());
  if (known === undefined) throw invalid('OTEL_TRACES_SAMPLER', name, `one of ${SAMPLERS.join(', ')}`);
  // An explicitly named ratio sampler without an argument samples everything, as the spec says.
  return { name: known, ratio: ratio ?? 1 };
}

/**
 * The tracing settings, or undefined when tracing is off: no OTLP endpoint,
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. A value that cannot
 * work (another exporter or protocol, a bad URL or ratio) is an error naming
 * the variable, never a silent default.
 */
export function tracingSettings(env: NodeJS.ProcessEnv, defaultServiceName: string): TracingSettings | undefined {
  if (set(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const exporter = set(env, 'OTEL_TRACES_EXPORTER');
  if (exporter?.toLowerCase() === 'none') return undefined;
  if (exporter !== undefined && exporter.toLowerCase() !== 'otlp') throw invalid('OTEL_TRACES_EXPORTER', exporter, 'only otlp (or none) is supported');
  const url = tracesUrl(env);
  if (url === undefined) return undefined;
  for (const key of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const protocol = set(env, key);
    if (protocol !== undefined && protocol !== 'http/protobuf') throw invalid(key, protocol, 'only http/protobuf is supported');
    if (protocol !== undefined) break;
  }
  return { tracesUrl: url, serviceName: set(env, 'OTEL_SERVICE_NAME') ?? defaultServiceName, sampler: sampler(env) };
}
