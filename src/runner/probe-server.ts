import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/**
 * The runner's tiny HTTP surface on `--metrics-port` (docs/runner.md#probes-and-metrics):
 *  - `/livez`  200 while the process runs its loop;
 *  - `/readyz` 200 once the last tick reached ClickHouse, 503 while it does not
 *    (the runner stays alive and keeps retrying; readiness only tells the
 *    kubelet and the operator);
 *  - `/metrics` the runner's own prom-client registry.
 * node:http rather than Fastify: three fixed routes, no body parsing.
 */
export interface ProbeState {
  live(): boolean;
  ready(): { readonly ready: boolean; readonly reason: string };
}

export interface MetricsServer {
  readonly url: string;
  close(): Promise<void>;
}

function send(res: import('node:http').ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

export async function serveMetrics(registry: Registry, probes: ProbeState, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n');
    if (path === '/livez') return probes.live() ? send(res, 200, 'ok\n') : send(res, 503, 'stopping\n');
    if (path === '/readyz') {
      const state = probes.ready();
      return send(res, state.ready ? 200 : 503, `${state.reason}\n`);
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => send(res, 200, text, registry.contentType),
        () => send(res, 500, 'metrics unavailable\n'),
      );
      return;
    }
    send(res, 404, 'not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
