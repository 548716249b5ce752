import { readFileSync } from 'node:fs';
import { Server, ServerCredentials, type ChannelOptions } from '@grpc/grpc-js';
import type { ShimConfig } from '../../config/load.js';
import { DfeError, describeError, showValue } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { ShimMetrics } from '../metrics.js';
import type { ServingContext } from '../serve.js';
import type { ShimContext } from '../context.js';
import { externalScalerHandlers } from './handlers.js';
import { GrpcMetrics } from './metrics.js';
import { externalScalerService } from './proto.js';
import { codeName } from './status.js';
import { StreamHub } from './streams.js';

/**
 * The gRPC listener of KEDA's external / external-push scalers
 * (docs/api.md#grpc): its own port, the host and TLS files of HTTP. Started
 * and closed with the HTTP server by shim/start.ts.
 */
export interface GrpcServerOptions {
  /** `grpc`: where it says it listens, for /status, while it does. */
  readonly ctx: ServingContext & { readonly metrics: ShimMetrics } & Pick<ShimContext, 'grpc'>;
  readonly shim: Pick<ShimConfig, 'host' | 'tls'>;
  readonly port: number;
  readonly checkIntervalMs: number;
  readonly logger: Logger;
  /** Server keepalive pings (a client gone without a FIN frees its streams), default 30 s / 10 s. */
  readonly keepaliveTimeMs?: number;
  readonly keepaliveTimeoutMs?: number;
}

export interface RunningGrpc {
  /** `host:port` as a gRPC client dials it. */
  readonly address: string;
  readonly port: number;
  readonly streams: StreamHub;
  /** Ends the streams (OK: KEDA reconnects), lets unary calls finish for at most `graceMs`, then stops. */
  close(graceMs?: number): Promise<void>;
}

/** A file a setting names; unreadable is a config error naming the setting (as for HTTP). */
function readSetting(path: string, key: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new DfeError('CONFIG_INVALID', `invalid ${key}=${showValue(path)}: ${describeError(err)}`, { key, value: path, cause: err });
  }
}

/** TLS with the HTTP listener's files; with a client CA, the handshake refuses a client without a certificate it signed. */
export function grpcCredentials(tls: ShimConfig['tls']): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  const pair = { cert_chain: readSetting(tls.certFile, 'DFE_KEDA_SHIM_TLS_CERT_FILE'), private_key: readSetting(tls.keyFile, 'DFE_KEDA_SHIM_TLS_KEY_FILE') };
  if (tls.clientCaFile === undefined) return ServerCredentials.createSsl(null, [pair], false);
  return ServerCredentials.createSsl(readSetting(tls.clientCaFile, 'DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE'), [pair], true);
}

function hostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** True for startGrpcServer's failure to listen because the port is taken (@grpc/grpc-js says so only in its message). */
export function isGrpcPortTaken(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('gRPC listen on ') && /EADDRINUSE/.test(err.message);
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpc> {
  const { ctx, logger } = options;
  const credentials = grpcCredentials(options.shim.tls);
  const metrics = new GrpcMetrics(ctx.metrics.registry);
  const streams = new StreamHub({
    ctx,
    intervalMs: options.checkIntervalMs,
    metrics,
    logger,
    onEnd: (code) => metrics.requests.inc({ method: 'StreamIsActive', code: codeName(code) }),
  });
  const channelOptions: ChannelOptions = {
    'grpc.keepalive_time_ms': options.keepaliveTimeMs ?? 30_000,
    'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs ?? 10_000,
    // A ScaledObjectRef is a few hundred bytes; nothing bigger is read.
    'grpc.max_receive_message_length': 64 * 1024,
  };
  const server = new Server(channelOptions);
  server.addService(externalScalerService(), externalScalerHandlers({ ctx, metrics, logger, streams }));
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(hostPort(options.shim.host, options.port), credentials, (err, bound) => (err ? reject(err) : resolve(bound)));
  }).catch((err: unknown) => {
    // Like an HTTP listen failure: a startup failure (exit 1), not a config error.
    throw new Error(`gRPC listen on ${hostPort(options.shim.host, options.port)} (DFE_KEDA_SHIM_GRPC_PORT): ${describeError(err)}`, { cause: err });
  });
  let closed: Promise<void> | undefined;
  const close = (graceMs = 5_000) =>
    (closed ??= new Promise<void>((resolve) => {
      if (ctx.grpc.server === running) ctx.grpc.server = undefined;
      streams.close();
      const force = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, graceMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    }));
  const running: RunningGrpc = { address: hostPort(options.shim.host, port), port, streams, close };
  ctx.grpc.server = running;
  return running;
}
