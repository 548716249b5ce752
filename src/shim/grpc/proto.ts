import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

/**
 * KEDA's external scaler protocol, loaded at run time from the .proto KEDA
 * publishes (proto/externalscaler.proto, shipped in the package and the image):
 * the file stays byte-for-byte KEDA's, and no code generator joins the build.
 * The four messages the shim reads or writes are typed by hand below.
 */
export const PROTO_FILE = join('proto', 'externalscaler.proto');

/** proto/externalscaler.proto of this package, found by walking up from this module (src/ or dist/src/). */
export function protoPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, PROTO_FILE);
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`${PROTO_FILE} not found above ${dirname(fileURLToPath(import.meta.url))}`);
    dir = parent;
  }
}

/** Field names as in the .proto (camelCase already), int64 as JS numbers, absent fields as their defaults. */
export const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true } as const;

let loaded: ServiceClientConstructor | undefined;

/** The `externalscaler.ExternalScaler` service (its definition serves; the constructor is a client). */
export function externalScaler(): ServiceClientConstructor {
  if (loaded === undefined) {
    const pkg = loadPackageDefinition(loadSync(protoPath(), LOADER_OPTIONS));
    loaded = (pkg.externalscaler as GrpcObject).ExternalScaler as ServiceClientConstructor;
  }
  return loaded;
}

export function externalScalerService(): ServiceDefinition {
  return externalScaler().service;
}

export interface ScaledObjectRef {
  readonly name: string;
  readonly namespace: string;
  /** The trigger's metadata as KEDA passes it (docs/api.md#grpc). */
  readonly scalerMetadata: Readonly<Record<string, string>>;
}

export interface IsActiveResponse {
  readonly result: boolean;
}

export interface MetricSpec {
  readonly metricName: string;
  /** Deprecated in KEDA's proto; sent as the rounded target for older KEDAs. */
  readonly targetSize: number;
  readonly targetSizeFloat: number;
}

export interface GetMetricSpecResponse {
  readonly metricSpecs: readonly MetricSpec[];
}

export interface GetMetricsRequest {
  readonly scaledObjectRef: ScaledObjectRef | null;
  readonly metricName: string;
}

export interface MetricValue {
  readonly metricName: string;
  /** Deprecated in KEDA's proto; KEDA reads metricValueFloat when it is > 0. */
  readonly metricValue: number;
  readonly metricValueFloat: number;
}

export interface GetMetricsResponse {
  readonly metricValues: readonly MetricValue[];
}
