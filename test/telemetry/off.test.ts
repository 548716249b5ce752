import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { refusedPort } from '../helpers/faults.js';
import { freePort } from '../helpers/ports.js';
import { runNode } from '../helpers/run-process.js';

/**
 * Without an OTLP endpoint tracing is off and loads nothing
 * (docs/operations.md#traces): the shim CLI runs in a child process whose
 * module loader records every module (ESM loader hooks, and CommonJS's
 * require.cache), serves one poll, and no OpenTelemetry module (beyond the
 * API, see OTEL) is among them. The same run with an endpoint is the control: there they are.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const FIXTURE = join(import.meta.dirname, 'fixtures/loaded-modules.mjs');
const CLI = join(ROOT, 'dist/src/cli/shim.js');
/**
 * Every OpenTelemetry module but the API: prom-client's process metrics
 * require `@opentelemetry/api` (a no-op without an SDK) whatever we do.
 */
const OTEL = /[\\/]node_modules[\\/](@opentelemetry[\\/](?!api[\\/])|@fastify[\\/]otel[\\/])/;

interface Loaded {
  readonly answer: { value: number; source: string };
  readonly esm: string[];
  readonly cjs: string[];
}

async function loadedModules(env: Record<string, string>): Promise<Loaded> {
  const clickhouse = await refusedPort();
  const childEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, LOG_LEVEL: 'silent', DFE_CLICKHOUSE_BACKEND: 'server', ...env };
  const result = await runNode([FIXTURE, CLI, String(await freePort()), clickhouse.url], childEnv, 90_000);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout.trim().split('\n').at(-1)!) as Loaded;
}

describe('tracing off', () => {
  it('with no OTEL endpoint, the shim serves a poll and no OpenTelemetry module is ever loaded', async () => {
    const loaded = await loadedModules({});
    expect(loaded.answer).toMatchObject({ source: 'cold_hold' });
    // The record is real: fastify and the ClickHouse client are in it.
    expect(loaded.cjs.some((p) => p.includes(`${join('node_modules', 'fastify')}`))).toBe(true);
    expect(loaded.cjs.some((p) => p.includes(join('node_modules', '@clickhouse', 'client')))).toBe(true);
    expect(loaded.esm.some((u) => u.endsWith('/dist/src/telemetry/start.js'))).toBe(true);
    expect([...loaded.esm, ...loaded.cjs].filter((m) => OTEL.test(m))).toEqual([]);
  });

  it('OTEL_SDK_DISABLED=true keeps it off even with an endpoint', async () => {
    const loaded = await loadedModules({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_SDK_DISABLED: 'true' });
    expect([...loaded.esm, ...loaded.cjs].filter((m) => OTEL.test(m))).toEqual([]);
  });

  it('control: with an endpoint, the SDK and the exporter are loaded', async () => {
    const collector = await refusedPort();
    const loaded = await loadedModules({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_off' });
    const all = [...loaded.esm, ...loaded.cjs].join('\n');
    for (const name of ['@opentelemetry/api', '@opentelemetry/sdk-trace-node', '@opentelemetry/exporter-trace-otlp-proto']) {
      expect(all, name).toContain(join('node_modules', name));
    }
  });
});
