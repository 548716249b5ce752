import { z } from 'zod';
import type { LastGoodEntry } from './store.js';

/**
 * The on-disk form of the last-good cache (docs/failsafe.md#snapshot-and-peers), pure:
 * encode, decode, and keep only entries the live catalogue still produces.
 * Each entry keeps its original `atMs` (wall clock), so a restarted replica's
 * ages go on counting and `max_stale_seconds` still applies.
 */
export const SNAPSHOT_VERSION = 1;

/** `[key, query, fingerprint, value, atMs]`: compact, about 100 bytes per pressure key. */
const ENTRY = z.tuple([z.string().min(1), z.string().min(1), z.string().min(1), z.number().finite().nonnegative(), z.number().int().nonnegative()]);

const SNAPSHOT = z.object({
  version: z.literal(SNAPSHOT_VERSION),
  written_at_ms: z.number().int().nonnegative(),
  entries: z.array(ENTRY),
});

export interface SnapshotEntry {
  readonly key: string;
  readonly entry: LastGoodEntry;
}

/** JSON text of the entries, in the order given (oldest-used first). */
export function encodeSnapshot(entries: Iterable<[string, LastGoodEntry]>, nowMs: number): string {
  const rows: unknown[] = [];
  for (const [key, e] of entries) rows.push([key, e.query, e.fingerprint, e.value, e.atMs]);
  return JSON.stringify({ version: SNAPSHOT_VERSION, written_at_ms: nowMs, entries: rows });
}

/** Parses a snapshot; throws an Error naming what is wrong (the caller adds the file name). */
export function decodeSnapshot(text: string): SnapshotEntry[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`not JSON (${(err as Error).message})`);
  }
  const parsed = SNAPSHOT.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`not a version-${SNAPSHOT_VERSION} snapshot: ${issue?.path.join('.') || 'root'}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data.entries.map(([key, query, fingerprint, value, atMs]) => ({ key, entry: { query, fingerprint, value, atMs } }));
}

/** What a read snapshot brings: entries still valid, and counts of those dropped and why. */
export interface KeptEntries {
  readonly kept: SnapshotEntry[];
  readonly droppedGone: number;
  readonly droppedChanged: number;
}

/** Keeps entries whose query is still in the catalogue with the same fingerprint (an unchanged compiled definition). */
export function keepLive(entries: readonly SnapshotEntry[], fingerprintOf: (query: string) => string | undefined): KeptEntries {
  const kept: SnapshotEntry[] = [];
  let droppedGone = 0;
  let droppedChanged = 0;
  for (const item of entries) {
    const live = fingerprintOf(item.entry.query);
    if (live === undefined) droppedGone += 1;
    else if (live !== item.entry.fingerprint) droppedChanged += 1;
    else kept.push(item);
  }
  return { kept, droppedGone, droppedChanged };
}
