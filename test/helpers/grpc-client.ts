import { credentials as channelCredentials, loadPackageDefinition, type ChannelCredentials, type Client, type ClientReadableStream, type GrpcObject, type ServiceClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { protoPath } from '../../src/shim/grpc/proto.js';

/**
 * A real gRPC client of KEDA's external scaler, built from the same .proto
 * with @grpc/proto-loader, as KEDA's Go client is built from it: the calls go
 * through real sockets to the shim's gRPC listener.
 */
export type Metadata = Record<string, string>;

export interface ScalerClient {
  isActive(metadata: Metadata): Promise<{ result: boolean }>;
  getMetricSpec(metadata: Metadata): Promise<{ metricSpecs: { metricName: string; targetSize: number; targetSizeFloat: number }[] }>;
  getMetrics(metadata: Metadata, metricName?: string): Promise<{ metricValues: { metricName: string; metricValue: number; metricValueFloat: number }[] }>;
  streamIsActive(metadata: Metadata): ActivityStream;
  streamMetricSpec(metadata: Metadata): Promise<ServiceError | undefined>;
  close(): void;
}

/** What a StreamIsActive stream received: messages, and how it ended (if it did). */
export interface ActivityStream {
  readonly messages: boolean[];
  ended: { code: number; details: string } | undefined;
  cancel(): void;
}

let constructor: ServiceClientConstructor | undefined;

function serviceClient(): ServiceClientConstructor {
  constructor ??= ((loadPackageDefinition(loadSync(protoPath(), { keepCase: true, longs: Number, defaults: true })).externalscaler as GrpcObject)
    .ExternalScaler as ServiceClientConstructor);
  return constructor;
}

type Callback<T> = (err: ServiceError | null, value: T) => void;
type Unary = (request: unknown, callback: Callback<unknown>) => void;

function ref(metadata: Metadata) {
  return { name: 'so', namespace: 'ns', scalerMetadata: metadata };
}

export function scalerClient(address: string, creds: ChannelCredentials = channelCredentials.createInsecure(), options: Record<string, string | number> = {}): ScalerClient {
  const Ctor = serviceClient();
  const client = new Ctor(address, creds, options) as Client & Record<string, Unary>;
  const call = <T>(method: string, request: unknown) =>
    new Promise<T>((resolve, reject) => {
      (client[method] as Unary).call(client, request, (err, value) => (err ? reject(err) : resolve(value as T)));
    });
  return {
    isActive: (metadata) => call('IsActive', ref(metadata)),
    getMetricSpec: (metadata) => call('GetMetricSpec', ref(metadata)),
    getMetrics: (metadata, metricName = 'm') => call('GetMetrics', { scaledObjectRef: ref(metadata), metricName }),
    streamIsActive(metadata) {
      const stream = (client.StreamIsActive as unknown as (r: unknown) => ClientReadableStream<{ result: boolean }>).call(client, ref(metadata));
      const out: ActivityStream = { messages: [], ended: undefined, cancel: () => stream.cancel() };
      stream.on('data', (m: { result: boolean }) => out.messages.push(m.result));
      stream.on('error', (err: ServiceError) => (out.ended ??= { code: err.code, details: err.details }));
      stream.on('status', (s: { code: number; details: string }) => (out.ended ??= { code: s.code, details: s.details }));
      return out;
    },
    streamMetricSpec(metadata) {
      const stream = (client.StreamMetricSpec as unknown as (r: unknown) => ClientReadableStream<unknown>).call(client, ref(metadata));
      return new Promise((resolve) => {
        stream.on('data', () => undefined);
        stream.on('error', (err: ServiceError) => resolve(err));
        stream.on('end', () => resolve(undefined));
      });
    },
    close: () => client.close(),
  };
}

/** Polls `condition` until it holds (bounded); no timing is asserted. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
