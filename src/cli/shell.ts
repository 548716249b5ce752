import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import closeWithGrace from 'close-with-grace';
import { describeError, exitCodeOf, isDfeError } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * The one shell of the three programs (`dfe-keda-shim`, `dfe-hunt-runner`,
 * `npm start`): argv → config → start → signals → exit code. The programs
 * themselves are libraries (`startShim`, `startHuntRunner`, `startDemo`) that
 * start and hand back something to close; which exit code an error gives is
 * the error table's (src/errors.ts, docs/api.md#errors).
 */

/** A started program: close() stops it gracefully (in-flight work finishes). */
export interface Running {
  close(): Promise<void>;
}

/** How a failure is printed: one line to stderr, `<prefix><text>`. */
export interface FailureStyle {
  /** E.g. `dfe-keda-shim: `. */
  readonly prefix: string;
  /** Printed after a usage error (the command's or node's argument parser's), after a blank line. */
  readonly usage?: string;
  /** A DfeError's whole message rather than its first line. */
  readonly wholeMessage?: boolean;
}

/** Writes what went wrong and returns the exit code it gives. */
export function reportFailure(err: unknown, style: FailureStyle): number {
  // An operator gets one line to act on: DfeError messages name the key or file.
  const text = isDfeError(err) ? (style.wholeMessage ? err.message : (err.message.split('\n')[0] ?? err.code)) : describeError(err);
  const usage = style.usage !== undefined && isUsageError(err) ? `\n${style.usage}` : '';
  process.stderr.write(`${style.prefix}${text}\n${usage}`);
  return exitCodeOf(err);
}

function isUsageError(err: unknown): boolean {
  if (isDfeError(err)) return err.code === 'USAGE';
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

export interface StopOptions {
  readonly logger: Logger;
  /** How long close() may take; past it the process exits 1 anyway. */
  readonly graceMs: number;
  /** Logged (with the signal) when a stop begins. */
  readonly stoppingMessage: string;
  /** Logged once close() is done. */
  readonly stoppedMessage?: string;
  /** SIGHUP reloads instead of stopping (the shim's catalogue). */
  readonly reload?: () => Promise<unknown>;
  /**
   * Only the first SIGINT/SIGTERM counts; repeats are ignored and `graceMs` still bounds the
   * stop. Default: a second one exits 1 at once. The demo needs it: `npm start` runs
   * `sh -c '… exec node …'`, so a SIGTERM sent to npm reaches the process (without the exec
   * the demo ran on as an orphan holding its ports and the embedded database), and Ctrl-C then
   * arrives twice, from the terminal and forwarded by npm.
   */
  readonly ignoreRepeatedStop?: boolean;
}

/**
 * Turns signals into a bounded graceful stop (close-with-grace): a stop signal
 * closes the program and exits 0; an uncaught error closes it and exits 1; a
 * stop that outlasts `graceMs` exits 1.
 */
export function stopOnSignals(running: Running, options: StopOptions): { uninstall(): void } {
  const { logger } = options;
  const skip: closeWithGrace.AllEvents[] = [];
  if (options.reload) skip.push('SIGHUP');
  if (options.ignoreRepeatedStop) skip.push(...STOP_SIGNALS);
  const grace = closeWithGrace(
    {
      delay: options.graceMs,
      skip,
      logger: { error: (message: unknown) => logger.error({ err: message }, 'shutdown problem') },
    },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'fatal error; shutting down');
      else if (signal) logger.info({ signal }, options.stoppingMessage);
      await running.close();
      if (options.stoppedMessage) logger.info(options.stoppedMessage);
    },
  );
  let stopping = false;
  const onStop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, options.stoppingMessage);
    void grace.close();
  };
  if (options.ignoreRepeatedStop) for (const signal of STOP_SIGNALS) process.on(signal, onStop);
  const reload = options.reload;
  const onHup = () => {
    if (!reload) return;
    logger.info('SIGHUP: reloading the catalogue');
    reload().catch((err: unknown) => logger.error({ err }, 'catalogue reload failed'));
  };
  if (reload) process.on('SIGHUP', onHup);
  return {
    uninstall() {
      grace.uninstall();
      process.removeListener('SIGHUP', onHup);
      for (const signal of STOP_SIGNALS) process.removeListener(signal, onStop);
    },
  };
}

/** A long-running program as the shell drives it. */
export interface Program<C, R extends Running> {
  readonly failure: FailureStyle;
  /** argv and environment → config; throws on bad input; a number to exit with at once (`--help`). */
  configure(): C | number;
  start(config: C): Promise<R>;
  /** How signals stop what `start` returned. */
  signals(running: R): StopOptions;
}

/**
 * configure → start → signals. Resolves with what runs (signals end it), or
 * with the exit code when nothing does.
 */
export async function launch<C extends { readonly notices?: readonly string[] }, R extends Running>(program: Program<C, R>): Promise<R | number> {
  let running: R;
  let config: C | number;
  try {
    config = program.configure();
    if (typeof config === 'number') return config;
    running = await program.start(config);
  } catch (err) {
    return reportFailure(err, program.failure);
  }
  const signals = program.signals(running);
  for (const notice of config.notices ?? []) signals.logger.warn(notice);
  stopOnSignals(running, signals);
  return running;
}

/**
 * The process end of a CLI: an exit code ends it once stdout has drained; a
 * running program is left to its signals; an unexpected rejection prints one
 * line and exits 1.
 */
export function exitWhenDone(result: Promise<Running | number>, style: FailureStyle): void {
  // `dfe-hunt-runner schema --print | head`: a closed pipe ends the output, not the process with a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  result
    .catch((err: unknown) => {
      reportFailure(err, style);
      return 1;
    })
    .then((outcome) => {
      if (typeof outcome === 'number') process.stdout.write('', () => process.exit(outcome));
    })
    .catch(() => process.exit(1));
}

/** Whether this module's file is the script node was started with (not an import by tests or benches). */
export function invokedDirectly(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return moduleUrl === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}
