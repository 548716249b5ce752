import type { Readable } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';

/**
 * The longest SQL text (characters) a server client sends in the URL. Encoded, ASCII
 * SQL takes at most 3 bytes a character, about 6 KB, under the 8 KB request line of
 * common HTTP proxies (nginx's default); a longer text goes in the body as before.
 * The built-in queries are well under it (backlog about 1,700).
 */
export const MAX_URL_QUERY_CHARS = 2_048;

/**
 * `@clickhouse/client` sends an `exec`'s SQL as the POST body by streaming it
 * (`stream.pipeline(Readable.from([sql]), request)`), which cost about 0.1–0.2 ms
 * of CPU per query here and kept each request's objects alive past young-generation
 * collections (about 12 KB a query promoted to the old generation;
 * docs/performance.md#one-connection-where-the-tail-went). Given `values`, the
 * client puts the SQL in the URL's `query` parameter instead and sends `values`
 * as the body; an empty body is ended at once, without a stream. ClickHouse runs
 * the URL's query followed by the body, so an empty body runs exactly the same
 * statement with the same parameters and settings.
 *
 * Server mode only (client.ts): chdb's connection reads an empty `values` as an
 * INSERT with no rows and runs nothing. Calls that pass `values`, and SQL longer
 * than MAX_URL_QUERY_CHARS, are left as they are. It relies on the client sending
 * its requests uncompressed, as client.ts makes it: a gzip `Content-Encoding` on an
 * empty body would not decompress.
 */
export function sendShortQueriesInUrl(client: ClickHouseClient): void {
  const exec = client.exec.bind(client);
  client.exec = (params) => ('values' in params || params.query.length > MAX_URL_QUERY_CHARS ? exec(params) : exec({ ...params, values: EMPTY_BODY }));
}

/** The library ends a request whose body is falsy without streaming it (its typings ask for a stream). */
const EMPTY_BODY = '' as unknown as Readable;
