import type { CompiledQuery } from '../../src/catalogue/types.js';
import { silentLogger } from '../../src/log.js';
import { startGrpcServer, type GrpcServerOptions, type RunningGrpc } from '../../src/shim/grpc/server.js';
import { scalerClient, type ScalerClient } from './grpc-client.js';
import { get, makeApp, type AppUnderTest } from './shim.js';

/** A shim app with its gRPC listener on a free loopback port and a real client of it. */
export interface GrpcUnderTest {
  readonly t: AppUnderTest;
  readonly grpc: RunningGrpc;
  readonly client: ScalerClient;
  /** `dfe_keda_shim_grpc_stream_checks_total{outcome="fresh"}` as scraped now. */
  freshChecks(): Promise<number>;
  close(): Promise<void>;
}

export async function startGrpcUnderTest(options: {
  readonly queries: CompiledQuery[];
  readonly clickhouse: Parameters<typeof makeApp>[0]['clickhouse'];
  /** Overrides of the server's options (check interval, keepalive). */
  readonly server?: Partial<Pick<GrpcServerOptions, 'checkIntervalMs' | 'keepaliveTimeMs' | 'keepaliveTimeoutMs'>>;
  readonly client?: (address: string) => ScalerClient;
}): Promise<GrpcUnderTest> {
  const t = await makeApp({ queries: options.queries, clickhouse: options.clickhouse });
  const grpc = await startGrpcServer({
    ctx: t.app.shim,
    shim: { host: '127.0.0.1', tls: undefined },
    port: 0,
    checkIntervalMs: 100,
    logger: silentLogger(),
    ...options.server,
  });
  const client = (options.client ?? scalerClient)(grpc.address);
  return {
    t,
    grpc,
    client,
    async freshChecks() {
      const text = (await get(t.app, '/metrics')).body.text as string;
      return Number(/dfe_keda_shim_grpc_stream_checks_total\{outcome="fresh"\} (\d+)/.exec(text)?.[1] ?? 0);
    },
    async close() {
      client.close();
      await grpc.close();
      await t.app.close();
    },
  };
}
