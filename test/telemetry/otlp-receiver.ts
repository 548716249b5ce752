import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
// The OpenTelemetry package's own protobuf reader (otlp-transformer); the field numbers below are
// those of opentelemetry-proto's trace.proto, common.proto and resource.proto.
import { ProtobufReader } from '@opentelemetry/otlp-transformer/build/src/common/protobuf/protobuf-reader.js';

/**
 * A real OTLP/HTTP trace receiver on a loopback socket: it takes what an
 * exporter POSTs to /v1/traces (protobuf), decodes every span and answers
 * 200 with an empty ExportTraceServiceResponse, as a collector does.
 */
export type AttrValue = string | number | boolean | undefined;

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client (the OTLP SpanKind numbers). */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, AttrValue>>;
  /** 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
  readonly statusMessage: string;
  readonly resource: Readonly<Record<string, AttrValue>>;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: the OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Requests that came to another path or did not decode. */
  readonly rejected: string[];
  /** Resolves with the spans once `match` finds some, polling every 50 ms; rejects after `timeoutMs`. */
  waitFor(match: (span: ReceivedSpan) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;
export { SPAN_KIND };

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}

function fields(buf: Uint8Array, each: (field: number, wire: number, r: ProtobufReader) => void): void {
  const r = new ProtobufReader(buf);
  while (!r.isAtEnd()) {
    const { fieldNumber, wireType } = r.readTag();
    const before = r.pos;
    each(fieldNumber, wireType, r);
    if (r.pos === before) r.skip(wireType);
  }
}

function anyValue(buf: Uint8Array): AttrValue {
  let value: AttrValue;
  fields(buf, (field, wire, r) => {
    if (field === 1) value = r.readString();
    else if (field === 2) value = r.readVarint() !== 0;
    else if (field === 3) value = r.readVarint();
    else if (field === 4 && wire === 1) {
      const at = r.pos;
      r.skip(1);
      value = new DataView(buf.buffer, buf.byteOffset + at, 8).getFloat64(0, true);
    }
  });
  return value;
}

function keyValue(buf: Uint8Array, into: Record<string, AttrValue>): void {
  let key = '';
  let value: AttrValue;
  fields(buf, (field, _wire, r) => {
    if (field === 1) key = r.readString();
    else if (field === 2) value = anyValue(r.readBytes());
  });
  into[key] = value;
}

function attributesOf(buf: Uint8Array, field: number): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  fields(buf, (f, _wire, r) => {
    if (f === field) keyValue(r.readBytes(), out);
  });
  return out;
}

function span(buf: Uint8Array, resource: Record<string, AttrValue>): ReceivedSpan {
  const s = { traceId: '', spanId: '', parentSpanId: '', name: '', kind: 0, statusCode: 0, statusMessage: '' };
  const attributes: Record<string, AttrValue> = {};
  fields(buf, (field, _wire, r) => {
    if (field === 1) s.traceId = hex(r.readBytes());
    else if (field === 2) s.spanId = hex(r.readBytes());
    else if (field === 4) s.parentSpanId = hex(r.readBytes());
    else if (field === 5) s.name = r.readString();
    else if (field === 6) s.kind = r.readVarint();
    else if (field === 9) keyValue(r.readBytes(), attributes);
    else if (field === 15) {
      fields(r.readBytes(), (f, _w, sr) => {
        if (f === 2) s.statusMessage = sr.readString();
        else if (f === 3) s.statusCode = sr.readVarint();
      });
    }
  });
  return { ...s, attributes, resource };
}

/** ExportTraceServiceRequest → ResourceSpans(1) → {Resource(1), ScopeSpans(2) → Span(2)}. */
export function decodeTraces(body: Uint8Array): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  fields(body, (field, _wire, r) => {
    if (field !== 1) return;
    const resourceSpans = r.readBytes();
    let resource: Record<string, AttrValue> = {};
    const scopes: Uint8Array[] = [];
    fields(resourceSpans, (f, _w, rr) => {
      if (f === 1) resource = attributesOf(rr.readBytes(), 1);
      else if (f === 2) scopes.push(rr.readBytes());
    });
    for (const scope of scopes) {
      fields(scope, (f, _w, sr) => {
        if (f === 2) out.push(span(sr.readBytes(), resource));
      });
    }
  });
  return out;
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
}

export async function otlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const rejected: string[] = [];
  const server = createServer((req, res) => {
    bodyOf(req)
      .then((body) => {
        if (req.method !== 'POST' || req.url !== '/v1/traces' || req.headers['content-type'] !== 'application/x-protobuf') {
          rejected.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
          res.writeHead(404).end();
          return;
        }
        spans.push(...decodeTraces(body));
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      })
      .catch((err: unknown) => {
        rejected.push(String(err));
        res.writeHead(400).end();
      });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    rejected,
    async waitFor(match, timeoutMs = 30_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = spans.filter(match);
        if (found.length > 0) return found;
        if (Date.now() > until) throw new Error(`no matching span within ${timeoutMs} ms; received: ${spans.map((s) => s.name).join(', ') || 'none'}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
