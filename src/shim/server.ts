import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * The process side of the shim: listen, and turn signals into actions.
 * SIGTERM/SIGINT: stop accepting, let in-flight answers finish (Fastify's
 * close waits for them), run `onClosed` (close the ClickHouse client), exit 0.
 * SIGHUP: reload the catalogue; a bad one is rejected and the old one serves.
 */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** Listens and returns the base URL. readyz turns 200 from here on. */
export async function listenShim(app: FastifyInstance, address: ListenAddress): Promise<string> {
  return app.listen({ host: address.host, port: address.port });
}

export interface SignalOptions {
  readonly app: FastifyInstance;
  readonly logger: Logger;
  /** After the server has closed: stop the catalogue watch, close the ClickHouse client. */
  readonly onClosed: () => Promise<void>;
  /** SIGHUP. */
  readonly reload?: () => Promise<unknown>;
  /** How long in-flight answers may take before the process exits anyway. Default 10 000 ms. */
  readonly graceMs?: number;
}

export interface InstalledSignals {
  uninstall(): void;
}

export function installSignals(options: SignalOptions): InstalledSignals {
  const { app, logger } = options;
  const grace = closeWithGrace(
    {
      delay: options.graceMs ?? 10_000,
      // SIGHUP means "reload", never "exit".
      skip: ['SIGHUP'],
      logger: { error: (message: unknown) => logger.error({ reason: describeError(message) }, 'shutdown problem') },
    },
    async ({ signal, err }) => {
      if (err) logger.error({ reason: describeError(err) }, 'fatal error; shutting down');
      else logger.info({ signal }, 'shutting down: finishing in-flight answers');
      await app.close();
      await options.onClosed();
      logger.info('shut down');
    },
  );
  const onHup = () => {
    if (!options.reload) return;
    logger.info('SIGHUP: reloading the catalogue');
    options.reload().catch((err: unknown) => logger.error({ err }, 'catalogue reload failed'));
  };
  process.on('SIGHUP', onHup);
  return {
    uninstall() {
      grace.uninstall();
      process.removeListener('SIGHUP', onHup);
    },
  };
}
