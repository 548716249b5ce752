import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OtlpReceiver } from './otlp-receiver.js';
import type { RecordingFront } from './recording-front.js';
import { startTracedShim, type TracedShim } from './traced-shim.js';

/**
 * Who decides what is sampled (docs/operations.md#traces): a root poll is
 * decided before any span is made (here: never, `parentbased_always_off`), a
 * caller's `traceparent` decides its poll, and a sampled poll keeps its
 * ClickHouse span and sends `traceparent`; an unsampled one sends none.
 * Real OTLP receiver and a loopback front that records the headers it gets.
 */
let traced: TracedShim;
let receiver: OtlpReceiver;
let front: RecordingFront;
/** Every distinct `k` is a key of its own, so each poll asks ClickHouse. */
const OVERRIDE = ['queries:', '  keyed:', '    params: [k]', '    sql: SELECT {k:String} AS k, 1 AS value', ''].join('\n');

beforeAll(async () => {
  traced = await startTracedShim({ otel: { OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, override: OVERRIDE, answer: 1 });
  ({ receiver, front } = traced);
});

afterAll(async () => traced?.close());

/** Polls /q/keyed?k=… and returns the headers ClickHouse got for it. */
async function poll(k: string, headers: Record<string, string> = {}) {
  const before = front.requests.length;
  const res = await fetch(`${traced.shim.url}/q/keyed?k=${k}`, { headers });
  expect(res.status).toBe(200);
  expect(front.requests.length).toBe(before + 1);
  return front.requests.at(-1)!.headers;
}

describe('sampling', () => {
  it('an unsampled root poll makes no span and sends ClickHouse no traceparent', async () => {
    for (const k of ['a', 'b', 'c']) expect((await poll(k)).traceparent).toBeUndefined();
    await traced.telemetry.flush();
    expect(receiver.spans).toEqual([]);
  });

  it("a caller's unsampled traceparent is followed: nothing exported, nothing sent on", async () => {
    const headers = await poll('d', { traceparent: '00-11111111111111111111111111111111-2222222222222222-00' });
    expect(headers.traceparent).toBeUndefined();
    await traced.telemetry.flush();
    expect(receiver.spans).toEqual([]);
  });

  it("a caller's sampled traceparent is followed even though roots are off: the poll and its query are exported, ClickHouse gets the trace", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const headers = await poll('e', { traceparent: `00-${traceId}-${callerSpan}-01` });
    await traced.telemetry.flush();
    const [pollSpan] = await receiver.waitFor((s) => s.traceId === traceId && s.parentSpanId === callerSpan);
    const [querySpan] = await receiver.waitFor((s) => s.traceId === traceId && s.parentSpanId === pollSpan!.spanId);
    expect(querySpan!.name).toBe('SELECT keyed');
    expect(headers.traceparent).toBe(`00-${traceId}-${querySpan!.spanId}-01`);
    expect(receiver.spans.every((s) => s.traceId === traceId)).toBe(true);
  });
});
