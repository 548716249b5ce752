import { describe, expect, it } from 'vitest';
import { DfeError } from '../../../src/errors.js';
import { DEFAULT_SAMPLER, rootSampling, tracingSettings } from '../../../src/telemetry/settings.js';

/** OTEL_* → tracing settings (docs/operations.md#traces): off without an endpoint, a bad value names its variable. */
const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

function configError(env: NodeJS.ProcessEnv): DfeError {
  try {
    tracingSettings(env, 'dfe-keda-shim');
  } catch (err) {
    if (err instanceof DfeError) return err;
    throw err;
  }
  throw new Error('no error');
}

describe('tracing settings', () => {
  it('are off without an endpoint, with an empty one, with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none', () => {
    expect(tracingSettings({}, 'x')).toBeUndefined();
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }, 'x')).toBeUndefined();
    expect(tracingSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }, 'x')).toBeUndefined();
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }, 'x')).toBeUndefined();
  });

  it('post to <endpoint>/v1/traces, or to the traces endpoint as given', () => {
    expect(tracingSettings(ENDPOINT, 'x')?.tracesUrl).toBe('http://collector:4318/v1/traces');
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c:4318/otlp/' }, 'x')?.tracesUrl).toBe('https://c:4318/otlp/v1/traces');
    expect(tracingSettings({ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/custom' }, 'x')?.tracesUrl).toBe('http://t:4318/custom');
  });

  it('name the service OTEL_SERVICE_NAME, else the program', () => {
    expect(tracingSettings(ENDPOINT, 'dfe-hunt-runner')?.serviceName).toBe('dfe-hunt-runner');
    expect(tracingSettings({ ...ENDPOINT, OTEL_SERVICE_NAME: 'shim-eu' }, 'dfe-hunt-runner')?.serviceName).toBe('shim-eu');
  });

  it('sample 1 % of roots, parent-based, unless told otherwise', () => {
    expect(DEFAULT_SAMPLER).toEqual({ name: 'parentbased_traceidratio', ratio: 0.01 });
    expect(tracingSettings(ENDPOINT, 'x')?.sampler).toEqual(DEFAULT_SAMPLER);
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_SAMPLER_ARG: '0.2' }, 'x')?.sampler).toEqual({ name: 'parentbased_traceidratio', ratio: 0.2 });
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'always_on' }, 'x')?.sampler.name).toBe('always_on');
    // An explicitly named ratio sampler without an argument: the spec's 1.0.
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio' }, 'x')?.sampler).toEqual({ name: 'traceidratio', ratio: 1 });
  });

  it.each([
    [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, 'OTEL_TRACES_SAMPLER', 'jaeger_remote'],
    [{ OTEL_TRACES_SAMPLER_ARG: '5' }, 'OTEL_TRACES_SAMPLER_ARG', '5'],
    [{ OTEL_TRACES_SAMPLER_ARG: 'one' }, 'OTEL_TRACES_SAMPLER_ARG', 'one'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER', 'zipkin'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://c:4317' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'grpc://c:4317'],
  ])('a bad value is a CONFIG_INVALID naming the variable and the value: %o', (bad, key, value) => {
    const err = configError({ ...ENDPOINT, ...bad });
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.key).toBe(key);
    expect(err.message).toContain(`${key}=${JSON.stringify(value)}`);
  });

  it('decide a root before any span is made: one draw against the ratio, fixed answers for the always_* samplers', () => {
    const draws = [0.004, 0.0099, 0.01, 0.5, 0.99];
    const sequence = () => {
      let i = 0;
      return () => draws[i++ % draws.length]!;
    };
    const onePercent = rootSampling({ name: 'parentbased_traceidratio', ratio: 0.01 }, sequence());
    expect(draws.map(() => onePercent())).toEqual([true, true, false, false, false]);
    const half = rootSampling({ name: 'traceidratio', ratio: 0.5 }, sequence());
    expect(draws.map(() => half())).toEqual([true, true, true, false, false]);
    const never = () => {
      throw new Error('no draw for a fixed answer');
    };
    for (const name of ['always_on', 'parentbased_always_on'] as const) expect(rootSampling({ name, ratio: 0 }, never)()).toBe(true);
    for (const name of ['always_off', 'parentbased_always_off'] as const) expect(rootSampling({ name, ratio: 1 }, never)()).toBe(false);
    expect(rootSampling({ name: 'traceidratio', ratio: 1 }, never)()).toBe(true);
    expect(rootSampling({ name: 'parentbased_traceidratio', ratio: 0 }, never)()).toBe(false);
  });
});
