import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningShim } from '../../src/shim/start.js';
import type { Telemetry } from '../../src/telemetry/start.js';
import { capturingLogger } from '../helpers/logger.js';
import { SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
import type { RecordingFront } from './recording-front.js';
import { startTracedShim, type TracedShim } from './traced-shim.js';

/**
 * One KEDA poll, traced end to end (docs/operations.md#traces): the shim runs
 * with OTEL_* set (sampler always_on) and exports to a real OTLP/HTTP receiver
 * on a loopback socket; its ClickHouse is a loopback front that records the
 * headers it gets. What arrives is decoded from the protobuf the exporter sent.
 */
let traced: TracedShim;
let receiver: OtlpReceiver;
let front: RecordingFront;
let telemetry: Telemetry;
let shim: RunningShim;
const log = capturingLogger();
/** An override query whose good value is reused for a minute. */
const OVERRIDE = ['queries:', '  young:', '    fresh_for_seconds: 60', '    sql: SELECT {n:UInt32} AS value', '    binds: {n: 1}', ''].join('\n');

beforeAll(async () => {
  traced = await startTracedShim({
    otel: { OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'shim-under-test' },
    override: OVERRIDE,
    answer: 7,
    logger: log.logger,
  });
  ({ receiver, front, telemetry, shim } = traced);
});

afterAll(async () => traced?.close());

async function poll(path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${shim.url}${path}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

const seenRoots = new Set<string>();

/** The root span of the poll just made to `url` (a root not returned before), once exported. */
async function rootOf(url: string): Promise<ReceivedSpan> {
  await telemetry.flush();
  const path = url.split('?')[0];
  const [root] = await receiver.waitFor((s) => s.parentSpanId === '' && s.attributes['url.path'] === path && !seenRoots.has(s.spanId));
  seenRoots.add(root!.spanId);
  return root!;
}

describe('a traced poll', () => {
  it('is a root server span with the route, the cache decision, and a ClickHouse child span whose traceparent reached ClickHouse', async () => {
    expect(await poll('/keda/hunt-backlog')).toMatchObject({ value: 7, source: 'fresh' });
    const root = await rootOf('/keda/hunt-backlog');
    expect(root.name).toBe('GET /keda/hunt-backlog');
    expect(root.kind).toBe(SPAN_KIND.server);
    expect(root.resource['service.name']).toBe('shim-under-test');
    expect(root.attributes).toMatchObject({
      'http.route': '/keda/hunt-backlog',
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'dfe.query': 'backlog',
      'dfe.cache.decision': 'started',
      'dfe.answer.source': 'fresh',
      'dfe.answer.age_seconds': 0,
    });
    expect(root.attributes['dfe.answer.reason']).toBeUndefined();

    const [child] = await receiver.waitFor((s) => s.traceId === root.traceId && s.parentSpanId === root.spanId);
    expect(child!.name).toBe('SELECT backlog');
    expect(child!.kind).toBe(SPAN_KIND.client);
    expect(child!.statusCode).toBe(0);
    const frontPort = Number(new URL(front.url).port);
    expect(child!.attributes).toMatchObject({
      'db.system.name': 'clickhouse',
      'db.operation.name': 'SELECT',
      'dfe.query': 'backlog',
      'server.address': '127.0.0.1',
      'server.port': frontPort,
    });
    // The SQL exactly as sent.
    const sent = front.requests.at(-1)!;
    expect(sent.sql).toContain(String(child!.attributes['db.query.text']));

    // ClickHouse got the CHILD span's context: its own spans hang under the query span.
    expect(sent.headers.traceparent).toBe(`00-${root.traceId}-${child!.spanId}-01`);
  });

  it('a poll answered from a young cached value says so and asks ClickHouse nothing', async () => {
    expect(await poll('/q/young')).toMatchObject({ value: 7, source: 'fresh' });
    expect((await rootOf('/q/young')).attributes['dfe.cache.decision']).toBe('started');
    const before = front.requests.length;
    expect(await poll('/q/young?api_key=not-in-any-span')).toMatchObject({ value: 7 });
    const root = await rootOf('/q/young?api_key=not-in-any-span');
    expect(root.attributes['http.route']).toBe('/q/:name');
    expect(front.requests.length).toBe(before);
    expect(root.attributes).toMatchObject({ 'dfe.cache.decision': 'young', 'dfe.answer.source': 'fresh' });
    expect(receiver.spans.filter((s) => s.parentSpanId === root.spanId)).toEqual([]);
  });

  it('a failed query: the fail-safe reason on the poll, an error status on the query span, trace_id on the log line', async () => {
    front.failing = true;
    try {
      expect(await poll('/keda/pressure?service=traced-svc')).toMatchObject({ source: 'cold_hold' });
    } finally {
      front.failing = false;
    }
    const root = await rootOf('/keda/pressure?service=traced-svc');
    expect(root.attributes).toMatchObject({ 'dfe.query': 'pressure', 'dfe.cache.decision': 'started', 'dfe.answer.source': 'cold_hold', 'dfe.answer.reason': 'error' });
    const [child] = await receiver.waitFor((s) => s.parentSpanId === root.spanId);
    expect(child!.statusCode).toBe(2);
    expect(child!.statusMessage).toBe('error');
    // db.query.text holds the SQL, never a value: `service` went as a bound parameter
    // (a lone service of the batched pressure query runs its one-by-one form, docs/catalogue.md#batch).
    const sent = front.requests.at(-1)!;
    expect(new URL(sent.url, 'http://x').searchParams.get('param_service')).toBe('traced-svc');
    expect(String(child!.attributes['db.query.text'])).toContain('{service:String}');
    expect(String(child!.attributes['db.query.text'])).not.toContain('traced-svc');
    const line = log.lines.find((l) => l.msg === 'query failed; answered from the fail-safe path' && l.query === 'pressure');
    expect(line).toMatchObject({ trace_id: root.traceId });
  });

  it("a caller's traceparent makes the poll its child", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const res = await fetch(`${shim.url}/q/young?caller=1`, { headers: { traceparent: `00-${traceId}-${callerSpan}-01` } });
    expect(res.status).toBe(200);
    await telemetry.flush();
    const [poll] = await receiver.waitFor((s) => s.traceId === traceId && s.attributes['url.path'] === '/q/young');
    expect(poll!.parentSpanId).toBe(callerSpan);
    expect(poll!.kind).toBe(SPAN_KIND.server);
  });

  it('a query string (in apiKey mode it carries the key) is in no span', () => {
    expect(JSON.stringify(receiver.spans)).not.toContain('not-in-any-span');
  });

  it('logs no trace_id outside a span', async () => {
    log.logger.info('outside any span');
    expect(log.lines.at(-1)).not.toHaveProperty('trace_id');
    expect(receiver.rejected).toEqual([]);
  });
});
