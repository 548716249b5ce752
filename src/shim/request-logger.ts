import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

/**
 * Fastify gives every request a child logger bound to its request id. A pino
 * child serialises its bindings (through the redaction paths of log.ts) when it
 * is made, on every request, though the shim logs from a request only when
 * something goes wrong. This one makes the real child on its first use; a
 * request that logs nothing costs one small object. docs/performance.md
 */
const METHODS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
type Method = (typeof METHODS)[number];
type Call = (...args: unknown[]) => void;

class LazyChildLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  private call(method: Method, args: unknown[]): void {
    (this.real()[method] as Call).apply(this.made, args);
  }

  get level(): string {
    return this.made?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, options);
  }

  // The level methods, once on the prototype (not closures per instance: one
  // logger is made per request). Each makes the real child and forwards.
  static {
    for (const method of METHODS) {
      Object.defineProperty(LazyChildLogger.prototype, method, {
        value(this: LazyChildLogger, ...args: unknown[]): void {
          this.call(method, args);
        },
        writable: true,
        configurable: true,
      });
    }
  }
}

/**
 * Fastify's `childLoggerFactory`: a request logger made on first use, a child of
 * `root`. The shim's Fastify has no logger of its own (app.ts): the parent it
 * passes is its no-op logger, not used.
 */
export function lazyChildLoggerOf(root: FastifyBaseLogger): (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) => FastifyBaseLogger {
  return (_parent, bindings, options) => new LazyChildLogger(root, bindings, options) as unknown as FastifyBaseLogger;
}
