/**
 * The chart's `tracing` values (docs/operations.md#traces): an OTLP endpoint reaches both
 * programs as the standard OTEL_* variables; without one, no OTEL_* variable is set (tracing off).
 */
import { expect, it } from 'vitest';
import { needs } from '../helpers/requirement.js';
import { byKind, helmTemplate, missing, type Manifest } from '../helpers/tools.js';

const CH = { clickhouse: { url: 'https://clickhouse.example:8443', existingSecret: 'ch-password' } };
const skip = missing('helm');

type Container = { name: string; env?: { name: string; value?: string }[] };

function otelEnv(manifests: Manifest[]): Record<string, Record<string, string | undefined>> {
  const out: Record<string, Record<string, string | undefined>> = {};
  for (const deployment of byKind(manifests, 'Deployment')) {
    const containers = (deployment as unknown as { spec: { template: { spec: { containers: Container[] } } } }).spec.template.spec.containers;
    for (const c of containers) {
      out[c.name] = Object.fromEntries((c.env ?? []).filter((e) => e.name.startsWith('OTEL_')).map((e) => [e.name, e.value]));
    }
  }
  return out;
}

needs(skip).describe('chart tracing values', () => {
  it('set no OTEL_* variable by default', () => {
    const env = otelEnv(helmTemplate(CH).manifests);
    expect(Object.keys(env).length).toBeGreaterThanOrEqual(2);
    for (const vars of Object.values(env)) expect(vars).toEqual({});
  });

  it('an endpoint reaches the shim and the runner, with the sampler ratio', () => {
    const env = otelEnv(helmTemplate({ ...CH, tracing: { otlpEndpoint: 'http://otel-collector:4318', samplerRatio: 0.05 } }).manifests);
    expect(Object.keys(env).length).toBeGreaterThanOrEqual(2);
    for (const vars of Object.values(env)) {
      expect(vars).toEqual({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318', OTEL_TRACES_SAMPLER_ARG: '0.05' });
    }
  });

  it('a collector address without a scheme is refused by the schema', () => {
    expect(() => helmTemplate({ ...CH, tracing: { otlpEndpoint: 'otel-collector:4318' } })).toThrow(/otlpEndpoint/);
  });
});
