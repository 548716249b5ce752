import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { PREFIX } from '../metrics.js';

/**
 * The gRPC port's metrics (docs/api.md#metrics), on the shim's registry. Labels
 * are the RPC names and gRPC status names only, never request input. Errors
 * are the requests whose `code` is not OK.
 */
export const GRPC_PREFIX = `${PREFIX}grpc_`;

export type StreamCheckOutcome = 'fresh' | 'held' | 'rejected';

export class GrpcMetrics {
  readonly requests: Counter<'method' | 'code'>;
  readonly duration: Histogram<'method'>;
  readonly openStreams: Gauge;
  readonly streamChecks: Counter<'outcome'>;
  readonly streamMessages: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: `${GRPC_PREFIX}requests_total`,
      help: 'gRPC calls by method and status code (OK, INVALID_ARGUMENT, UNAVAILABLE, ...); a stream counts when it ends.',
      labelNames: ['method', 'code'],
      registers,
    });
    this.duration = new Histogram({
      name: `${GRPC_PREFIX}request_duration_seconds`,
      help: 'Time to answer a unary gRPC call (IsActive, GetMetricSpec, GetMetrics), by method.',
      labelNames: ['method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.openStreams = new Gauge({ name: `${GRPC_PREFIX}open_streams`, help: 'Open StreamIsActive streams.', registers });
    this.streamChecks = new Counter({
      name: `${GRPC_PREFIX}stream_checks_total`,
      help: 'Checks of the open streams, one per distinct query and params, by outcome (fresh, held: ClickHouse failing so nothing sent, rejected: the metadata no longer validates).',
      labelNames: ['outcome'],
      registers,
    });
    this.streamMessages = new Counter({
      name: `${GRPC_PREFIX}stream_messages_total`,
      help: 'IsActive messages pushed on StreamIsActive streams (the first answer and each change).',
      registers,
    });
  }
}
