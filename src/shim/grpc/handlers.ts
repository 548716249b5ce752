import type { handleServerStreamingCall, handleUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from '../../log.js';
import { answerRequest, resolveRequest, usable, type ServingContext, type UsableAnswer } from '../serve.js';
import { isActive, readMetadata, requireTarget } from './metadata.js';
import type { GrpcMetrics } from './metrics.js';
import type {
  GetMetricSpecResponse,
  GetMetricsRequest,
  GetMetricsResponse,
  IsActiveResponse,
  ScaledObjectRef,
} from './proto.js';
import { codeName, grpcErrorOf, isExpected } from './status.js';
import type { StreamHub } from './streams.js';

/**
 * The four RPCs of KEDA's external scaler (docs/api.md#grpc), over the serving
 * path HTTP uses (shim/serve.ts). GetMetricSpec reads only the catalogue and
 * the metadata, never ClickHouse, so KEDA can always build the scaler and its
 * fallback can act when ClickHouse is down.
 */
export interface HandlerDeps {
  readonly ctx: ServingContext;
  readonly metrics: GrpcMetrics;
  readonly logger: Logger;
  readonly streams: StreamHub;
}

type Method = 'IsActive' | 'GetMetricSpec' | 'GetMetrics';

/** The answer the serving path gives for a trigger's metadata, `stale` as an error. */
function serveMetadata(ctx: ServingContext, ref: ScaledObjectRef | null): UsableAnswer | Promise<UsableAnswer> {
  const metadata = readMetadata(ref?.scalerMetadata);
  const request = resolveRequest(ctx, metadata.query, metadata.raw);
  const answer = answerRequest(ctx, request);
  if (answer instanceof Promise) return answer.then((a) => usable(request.query, a));
  return usable(request.query, answer);
}

/**
 * A unary handler: metrics and the error mapping around `answer`. Not async, so
 * a cached answer is sent without a promise in between (as HTTP does).
 */
function unary<Req, Res>(deps: HandlerDeps, method: Method, answer: (request: Req) => Res | Promise<Res>): handleUnaryCall<Req, Res> {
  const { metrics, logger } = deps;
  return (call, callback) => {
    const started = performance.now();
    const finish = (code: string) => {
      metrics.requests.inc({ method, code });
      metrics.duration.observe({ method }, (performance.now() - started) / 1000);
    };
    const fail = (err: unknown) => {
      const error = grpcErrorOf(err);
      if (!isExpected(err)) logger.error({ err, method }, 'gRPC call failed');
      finish(codeName(error.code));
      callback(error, null);
    };
    const ok = (response: Res) => {
      finish('OK');
      callback(null, response);
    };
    let result: Res | Promise<Res>;
    try {
      result = answer(call.request);
    } catch (err) {
      fail(err);
      return;
    }
    if (result instanceof Promise) result.then(ok, fail);
    else ok(result);
  };
}

function isActiveCall(deps: HandlerDeps): handleUnaryCall<ScaledObjectRef, IsActiveResponse> {
  return unary(deps, 'IsActive', (ref) => {
    const activation = readMetadata(ref.scalerMetadata).activationTargetValue;
    const answer = serveMetadata(deps.ctx, ref);
    if (answer instanceof Promise) return answer.then((a) => ({ result: isActive(a.value, activation) }));
    return { result: isActive(answer.value, activation) };
  });
}

function getMetricSpecCall(deps: HandlerDeps): handleUnaryCall<ScaledObjectRef, GetMetricSpecResponse> {
  return unary(deps, 'GetMetricSpec', (ref) => {
    const metadata = readMetadata(ref.scalerMetadata);
    // The same checks as a request (unknown query, bad params), then the target: no ClickHouse.
    const { query } = resolveRequest(deps.ctx, metadata.query, metadata.raw);
    const target = requireTarget(metadata);
    return { metricSpecs: [{ metricName: query.name, targetSize: Math.round(target), targetSizeFloat: target }] };
  });
}

function getMetricsCall(deps: HandlerDeps): handleUnaryCall<GetMetricsRequest, GetMetricsResponse> {
  return unary(deps, 'GetMetrics', (request) => {
    const respond = (a: UsableAnswer): GetMetricsResponse => ({
      metricValues: [{ metricName: request.metricName, metricValue: Math.round(a.value), metricValueFloat: a.value }],
    });
    const answer = serveMetadata(deps.ctx, request.scaledObjectRef);
    return answer instanceof Promise ? answer.then(respond) : respond(answer);
  });
}

function streamIsActiveCall(deps: HandlerDeps): handleServerStreamingCall<ScaledObjectRef, IsActiveResponse> {
  const { metrics, streams } = deps;
  return (call) => {
    try {
      streams.open(call, readMetadata(call.request.scalerMetadata));
    } catch (err) {
      const error = grpcErrorOf(err);
      metrics.requests.inc({ method: 'StreamIsActive', code: codeName(error.code) });
      call.emit('error', error);
    }
  };
}

/** The service implementation; StreamMetricSpec is left out, so grpc-js answers UNIMPLEMENTED. */
export function externalScalerHandlers(deps: HandlerDeps): UntypedServiceImplementation {
  return {
    IsActive: isActiveCall(deps),
    StreamIsActive: streamIsActiveCall(deps),
    GetMetricSpec: getMetricSpecCall(deps),
    GetMetrics: getMetricsCall(deps),
  };
}
