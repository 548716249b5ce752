import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { ClickHouseHandle } from '../src/clickhouse/client.js';
import { freePort } from '../test/helpers/ports.js';

/**
 * A real HTTP listener on loopback that runs every query it is sent on the
 * embedded engine and streams back the engine's own answer: a shim process in
 * SERVER mode can then query a modern engine (query parameters) where the only
 * clickhouse-server at hand is 18.16 (none). Not a ClickHouse emulation: it
 * computes nothing itself. Reads the SQL from the POST body, `param_<name>`
 * and `database` from the URL, as the HTTP interface takes them.
 */
export interface EmbeddedFront {
  readonly url: string;
  /** Queries run so far. */
  queries(): number;
  close(): Promise<void>;
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += (chunk as Buffer).toString('utf8');
  return text;
}

export async function startEmbeddedFront(embedded: ClickHouseHandle): Promise<EmbeddedFront> {
  let count = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://front');
      if (url.pathname === '/ping') return void res.end('Ok.\n');
      const sql = url.searchParams.get('query') ?? (await bodyOf(req));
      const params: Record<string, string> = {};
      for (const [name, value] of url.searchParams) if (name.startsWith('param_')) params[name.slice('param_'.length)] = value;
      count += 1;
      try {
        const { stream } = await embedded.client.exec({ query: sql, query_params: params });
        res.writeHead(200, { 'content-type': 'application/json' });
        stream.pipe(res);
      } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`Code: 1000. ${(err as Error).message}\n`);
      }
    })();
  });
  server.keepAliveTimeout = 10_000;
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    queries: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
