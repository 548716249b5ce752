import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback HTTP socket standing where the ClickHouse HTTP interface would
 * be, that RECORDS what the shim sends (headers, URL, SQL). It is not a
 * ClickHouse emulation: it executes nothing and answers every request with one
 * fixed JSONCompact row (`value` = `answer`), or with HTTP 500 while `failing`;
 * tests assert only what arrived, e.g. the `traceparent` header. (The real
 * ClickHouse of the tests is the embedded engine, which has no HTTP to carry
 * a header; the Debian clickhouse-server 18.16 takes no query parameters.)
 */
export interface RecordedRequest {
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** The URL's `query` parameter, or else the body (ClickHouse runs the first followed by the second). */
  readonly sql: string;
  /** The request body as it arrived. */
  readonly body: string;
}

export interface RecordingFront {
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** While true, every request gets HTTP 500 with a ClickHouse-style exception text. */
  failing: boolean;
  close(): Promise<void>;
}

export async function recordingFront(answer = 7): Promise<RecordingFront> {
  const requests: RecordedRequest[] = [];
  const front: { failing: boolean } = { failing: false };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://front');
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ url: req.url ?? '', headers: req.headers, sql: url.searchParams.get('query') ?? body, body });
      if (front.failing) {
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=UTF-8', 'X-ClickHouse-Exception-Code': '60' });
        res.end('Code: 60. DB::Exception: recorded front is failing on purpose. (UNKNOWN_TABLE)\n');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json; charset=UTF-8', 'X-ClickHouse-Format': 'JSONCompact' });
      res.end(JSON.stringify({ meta: [{ name: 'value', type: 'Float64' }], data: [[answer]], rows: 1 }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return Object.assign(front, {
    url: `http://127.0.0.1:${port}`,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
