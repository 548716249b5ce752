import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDatabase, type TestDatabase } from '../../helpers/clickhouse.js';
import { promtoolMissing, runPromtool } from '../../monitoring/promtool.js';
import { compiled, get, type AppUnderTest } from '../../helpers/shim.js';
import type { ScalerClient } from '../../helpers/grpc-client.js';
import { needs } from '../../helpers/requirement.js';
import { startGrpcUnderTest, type GrpcUnderTest } from '../../helpers/grpc.js';

/**
 * Each RPC of KEDA's external scaler through a real gRPC client on a real
 * socket, answered by the real engine through the shim's serving path; client
 * mistakes get INVALID_ARGUMENT with the text the HTTP 400/404 carries.
 */
let db: TestDatabase;
let t: AppUnderTest;
let client: ScalerClient;
let g: GrpcUnderTest;

beforeAll(async () => {
  db = await openTestDatabase('grpc_rpcs');
  const queries = [
    compiled('count', 'SELECT count() FROM numbers({n:UInt32})', { params: ['n'] }),
    compiled('pressure', 'SELECT 80 + length({service:String}) * 0', { params: ['service'], metricType: 'Value' }),
    compiled('half', 'SELECT 2.5'),
  ];
  g = await startGrpcUnderTest({ queries, clickhouse: db.handle });
  ({ t, client } = g);
});
afterAll(async () => {
  await g?.close();
  await db?.close();
});

async function rejection(promise: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await promise;
  } catch (err) {
    return err as { code: number; details: string };
  }
  throw new Error('expected the call to fail');
}

describe('GetMetrics', () => {
  it('answers the catalogue query with its params, the float KEDA reads and the metric name it asked for', async () => {
    const res = await client.getMetrics({ query: 'count', n: '12', targetValue: '5', scalerAddress: 'shim:9090' }, 'count');
    expect(res.metricValues).toEqual([{ metricName: 'count', metricValue: 12, metricValueFloat: 12 }]);
    expect((await client.getMetrics({ query: 'half' })).metricValues[0]).toMatchObject({ metricValueFloat: 2.5, metricValue: 3 });
  });

  it('shares the cache with HTTP: a value fetched over one is the value of the other', async () => {
    const before = t.app.shim.executor.queriesStarted;
    const http = await get(t.app, '/q/count?n=40');
    const viaGrpc = await client.getMetrics({ query: 'count', n: '40' });
    expect(http.body).toMatchObject({ value: 40, source: 'fresh' });
    expect(viaGrpc.metricValues[0]?.metricValueFloat).toBe(40);
    // fresh_for_seconds is 0 here, so each asks ClickHouse once: two queries, through one executor.
    expect(t.app.shim.executor.queriesStarted - before).toBe(2);
  });
});

describe('GetMetricSpec', () => {
  it('returns the target from the metadata and never asks ClickHouse', async () => {
    const before = t.app.shim.executor.queriesStarted;
    const res = await client.getMetricSpec({ query: 'pressure', service: 'api', targetValue: '70.5' });
    expect(res.metricSpecs).toEqual([{ metricName: 'pressure', targetSize: 71, targetSizeFloat: 70.5 }]);
    expect(t.app.shim.executor.queriesStarted).toBe(before);
  });

  it('needs targetValue', async () => {
    const err = await rejection(client.getMetricSpec({ query: 'half' }));
    expect(err).toMatchObject({ code: status.INVALID_ARGUMENT, details: 'missing required metadata key targetValue (the trigger target)' });
    const bad = await rejection(client.getMetricSpec({ query: 'half', targetValue: '0' }));
    expect(bad).toMatchObject({ code: status.INVALID_ARGUMENT, details: expect.stringMatching(/^targetValue="0" must be a number greater than 0/) });
  });
});

describe('IsActive', () => {
  it('is value > activationTargetValue (default 0)', async () => {
    expect(await client.isActive({ query: 'count', n: '3' })).toEqual({ result: true });
    expect(await client.isActive({ query: 'count', n: '0' })).toEqual({ result: false });
    expect(await client.isActive({ query: 'count', n: '3', activationTargetValue: '3' })).toEqual({ result: false });
    expect(await client.isActive({ query: 'count', n: '4', activationTargetValue: '3' })).toEqual({ result: true });
  });
});

describe('bad metadata', () => {
  it('is INVALID_ARGUMENT with the HTTP 404/400 message, and never reaches ClickHouse', async () => {
    const before = t.app.shim.executor.queriesStarted;
    const unknown = await get(t.app, '/q/nope');
    expect(unknown.status).toBe(404);
    for (const call of [client.getMetrics({ query: 'nope' }), client.isActive({ query: 'nope' }), client.getMetricSpec({ query: 'nope', targetValue: '1' })]) {
      expect(await rejection(call)).toMatchObject({ code: status.INVALID_ARGUMENT, details: unknown.body.error });
    }
    const missing = await get(t.app, '/q/count');
    expect(missing.status).toBe(400);
    expect(await rejection(client.getMetrics({ query: 'count' }))).toMatchObject({ code: status.INVALID_ARGUMENT, details: missing.body.error });
    const badParam = await get(t.app, '/q/count?n=1%3BDROP');
    expect(badParam.status).toBe(400);
    expect(await rejection(client.isActive({ query: 'count', n: '1;DROP' }))).toMatchObject({ code: status.INVALID_ARGUMENT, details: badParam.body.error });
    const badHold = await get(t.app, '/keda/pressure?service=a&hold=-1');
    expect(badHold.status).toBe(400);
    expect(await rejection(client.getMetrics({ query: 'pressure', service: 'a', hold: '-1' }))).toMatchObject({ details: badHold.body.error });
    expect(await rejection(client.getMetrics({ n: '1' }))).toMatchObject({ code: status.INVALID_ARGUMENT, details: 'missing required metadata key query (the catalogue query name)' });
    expect(await rejection(client.isActive({ query: 'half', activationTargetValue: 'abc' }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^activationTargetValue="abc" must be a number from 0 to/),
    });
    const stream = await new Promise<{ code: number; details: string }>((resolve) => {
      const s = client.streamIsActive({ query: 'nope' });
      const poll = setInterval(() => {
        if (s.ended) {
          clearInterval(poll);
          resolve(s.ended);
        }
      }, 10);
    });
    expect(stream).toEqual({ code: status.INVALID_ARGUMENT, details: unknown.body.error });
    expect(t.app.shim.executor.queriesStarted).toBe(before);
  });
});

describe('StreamMetricSpec', () => {
  it('is UNIMPLEMENTED, which KEDA takes as "keep pulling the spec"', async () => {
    expect(await client.streamMetricSpec({ query: 'half', targetValue: '1' })).toMatchObject({ code: status.UNIMPLEMENTED });
  });
});

describe('metrics', () => {
  it('counts calls by method and code, times unary calls', async () => {
    const text = (await get(t.app, '/metrics')).body.text as string;
    expect(text).toMatch(/dfe_keda_shim_grpc_requests_total\{method="GetMetrics",code="OK"\} [1-9]/);
    expect(text).toMatch(/dfe_keda_shim_grpc_requests_total\{method="GetMetrics",code="INVALID_ARGUMENT"\} [1-9]/);
    expect(text).toMatch(/dfe_keda_shim_grpc_request_duration_seconds_count\{method="IsActive"\} [1-9]/);
    expect(text).toMatch(/dfe_keda_shim_grpc_open_streams 0/);
  });
});

needs(promtoolMissing()).describe('promtool check metrics', () => {
  it('accepts the exposition with the gRPC series in it', async () => {
    const text = (await get(t.app, '/metrics')).body.text as string;
    expect(text).toMatch(/dfe_keda_shim_grpc_stream_checks_total/);
    const result = runPromtool(['check', 'metrics'], text);
    expect(result.output.trim()).toBe('');
    expect(result.status).toBe(0);
  });
});
