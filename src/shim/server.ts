import type { FastifyInstance } from 'fastify';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** Listens and returns the base URL; /readyz answers 200 from then on (routes/health.ts). */
export async function listenShim(app: FastifyInstance, address: ListenAddress): Promise<string> {
  return app.listen({ host: address.host, port: address.port });
}
