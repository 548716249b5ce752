import type { CatalogueProvider } from '../catalogue/types.js';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import type { ShimConfig } from '../config/load.js';
import type { AuthGuard } from './auth.js';
import type { QueryExecutor } from './executor.js';
import type { LastGood } from './last-good/last-good.js';
import type { ShimMetrics } from './metrics.js';
import type { StatusBoard } from './status-board.js';

/** What the routes share; built once by app.ts. */
export interface ShimContext {
  readonly catalogue: CatalogueProvider;
  readonly clickhouse: Pick<ClickHouseHandle, 'backend' | 'target' | 'client' | 'afterQueryError'>;
  readonly shim: ShimConfig;
  readonly executor: QueryExecutor;
  /** The last-good cache, its snapshot and peers (last-good/). */
  readonly lastGood: LastGood;
  /** Auth of the query routes (mode `none`: allows all). */
  readonly auth: AuthGuard;
  readonly metrics: ShimMetrics;
  readonly status: StatusBoard;
  /** Lifecycle: `starting` until the server listens, `listening` after, `closing` once close begins. */
  readonly lifecycle: { state: 'starting' | 'listening' | 'closing' };
  /** The gRPC port while it listens (grpc/server.ts registers itself), for /status; undefined when off. */
  readonly grpc: { server: GrpcStatusSource | undefined };
}

/** What /status shows of the gRPC port: where it listens and its StreamIsActive streams. */
export interface GrpcStatusSource {
  readonly address: string;
  readonly streams: { readonly size: number; readonly groupCount: number };
}

/** The options every route plugin is registered with (app.ts). */
export interface ShimRouteOptions {
  readonly ctx: ShimContext;
}
