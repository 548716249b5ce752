import type { FastifyInstance } from 'fastify';

/**
 * The listening side of the shim. Signals (SIGTERM/SIGINT: stop accepting, let
 * in-flight answers finish — Fastify's close waits for them — close ClickHouse,
 * exit 0; SIGHUP: reload the catalogue) are the CLI shell's, src/cli/shell.ts.
 */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** Listens and returns the base URL. readyz turns 200 from here on. */
export async function listenShim(app: FastifyInstance, address: ListenAddress): Promise<string> {
  return app.listen({ host: address.host, port: address.port });
}
