/** One-shot timers, injected so tests can fire them by hand. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
  /** Runs `fn` once the current turn of the event loop has handled its I/O (setImmediate): "the same tick". */
  soon(fn: () => void): void;
}

export const realTimers: Timers = Object.freeze({
  set: (fn: () => void, ms: number): unknown => setTimeout(fn, ms),
  clear: (handle: unknown): void => clearTimeout(handle as NodeJS.Timeout),
  soon: (fn: () => void): void => void setImmediate(fn),
});
