import type { FastifyInstance } from 'fastify';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Connections the kernel may hold for the shim before it accepts them (docs/failsafe.md#admission):
 * KEDA's poll loops reconnect together after an operator restart. Node's default, 511, let the
 * 512th and later connections of a 1 000-service burst retry their SYN a second later, as a
 * second burst. Linux caps it at net.core.somaxconn (4 096 by default since 5.4).
 */
export const LISTEN_BACKLOG = 4_096;

/** Listens and returns the base URL; /readyz answers 200 from then on (routes/health.ts). */
export async function listenShim(app: FastifyInstance, address: ListenAddress): Promise<string> {
  return app.listen({ host: address.host, port: address.port, backlog: LISTEN_BACKLOG });
}
