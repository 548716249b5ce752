import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { startShim, type RunningShim } from '../src/cli/shim.js';
import { freePort } from '../test/helpers/ports.js';

/** The real shim (startShim) on a loopback port with `overrideYaml` over the built-in catalogue. */
export interface BenchShim {
  readonly url: string;
  readonly shim: RunningShim;
  /** ClickHouse queries the shim has started so far. */
  queriesStarted(): number;
  cacheSize(): number;
  close(): Promise<void>;
}

export async function startBenchShim(
  overrideYaml: string,
  clickhouse: ClickHouseHandle | { url: string },
  env: Record<string, string> = {},
): Promise<BenchShim> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-bench-shim-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, overrideYaml);
  const config = loadConfig({
    DFE_KEDA_SHIM_HOST: '127.0.0.1',
    DFE_KEDA_SHIM_PORT: String(await freePort()),
    DFE_KEDA_SHIM_QUERY_CONFIG: overridePath,
    LOG_LEVEL: 'silent',
    ...('url' in clickhouse ? { DFE_CLICKHOUSE_URL: clickhouse.url } : { DFE_CLICKHOUSE_BACKEND: 'server', DFE_CLICKHOUSE_URL: 'http://127.0.0.1:1' }),
    ...env,
  });
  const shim = await startShim({ config, logger: silentLogger(), ...('url' in clickhouse ? {} : { clickhouse }) });
  return {
    url: shim.url,
    shim,
    queriesStarted: () => shim.app.shim.executor.queriesStarted,
    cacheSize: () => shim.app.shim.executor.cacheSize,
    async close() {
      await shim.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The baseline: a bare Fastify route answering the same JSON as a cached shim answer. */
export async function startBareFastify(body: Record<string, unknown>): Promise<{ url: string; app: FastifyInstance }> {
  const app = Fastify({ logger: false });
  app.get('/q/cached', async () => body);
  const url = await app.listen({ host: '127.0.0.1', port: await freePort() });
  return { url, app };
}
