import type { Context, ContextManager } from '@opentelemetry/api';

/**
 * A context that is current only for the synchronous extent of `with`: a
 * stack, no async hooks. The shim's choice (startTelemetry `context: 'sync'`):
 * on Node 20, the `AsyncLocalStorage` manager, once any span has been made
 * current, tracks every async resource of the process, a cost every poll pays
 * (docs/performance.md). The shim needs a span current only synchronously: its
 * query span and `traceparent` are made in the handler's synchronous part, and
 * the executor keeps the poll's span across its one wait itself.
 */
export function syncContextManager(root: Context): ContextManager {
  let current = root;
  const manager: ContextManager = {
    active: () => current,
    with(context, fn, thisArg, ...args) {
      const previous = current;
      current = context;
      try {
        return fn.call(thisArg, ...args);
      } finally {
        current = previous;
      }
    },
    bind<T>(context: Context, target: T): T {
      if (typeof target !== 'function') return target;
      const fn = target as unknown as (...args: unknown[]) => unknown;
      return function (this: unknown, ...args: unknown[]) {
        return manager.with(context, () => fn.apply(this, args));
      } as unknown as T;
    },
    enable: () => manager,
    disable() {
      current = root;
      return manager;
    },
  };
  return manager;
}
