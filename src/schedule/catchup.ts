import { runWindow, type RunWindow } from './window.js';

/**
 * Bounded catch-up (docs/hunts.md#catch-up). After an outage a run's window
 * `[watermark, fire)` can span days: one huge query, likely a memory-limit
 * failure, then a crash-loop. A window is therefore never longer than
 * `max_catchup` (and never shorter than one interval, so a bound below the
 * interval cannot cut an ordinary run); what lies before that is skipped,
 * and the caller says so loudly. Pure: the fire is the only "now".
 */
export interface CatchupWindow {
  /** What the run covers. */
  readonly window: RunWindow;
  /** The range left out, `[watermark, window start)`; undefined when nothing is. */
  readonly skipped: RunWindow | undefined;
}

/** The bound that applies: the hunt's own `max_catchup`, else the global one, at least one interval. */
export function effectiveMaxCatchup(intervalSeconds: number, globalSeconds: number, huntSeconds: number | undefined): number {
  return Math.max(intervalSeconds, huntSeconds ?? globalSeconds);
}

export function boundedRunWindow(fire: number, watermark: number | null, intervalSeconds: number, maxCatchupSeconds: number): CatchupWindow {
  const full = runWindow(fire, watermark, intervalSeconds);
  const earliest = fire - Math.max(intervalSeconds, maxCatchupSeconds);
  if (full.startSeconds >= earliest) return { window: full, skipped: undefined };
  return {
    window: { startSeconds: earliest, endSeconds: fire },
    skipped: { startSeconds: full.startSeconds, endSeconds: earliest },
  };
}
