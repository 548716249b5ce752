import { LRUCache } from 'lru-cache';
import type { GoodValue } from '../decision.js';

/**
 * The last-good cache (docs/failsafe.md): one entry per cache key, bounded
 * (LRU), each tagged with its catalogue query and that query's fingerprint,
 * so a snapshot or a peer answer can tell whether it still belongs to the
 * live definition.
 */
export interface LastGoodEntry extends GoodValue {
  readonly query: string;
  /** CompiledQuery.fingerprint of the definition that produced the value. */
  readonly fingerprint: string;
}

/** Default bound of the cache, in keys (DFE_KEDA_SHIM_CACHE_MAX_KEYS). */
export const DEFAULT_CACHE_MAX_KEYS = 10_000;

export class LastGoodStore {
  private readonly lru: LRUCache<string, LastGoodEntry>;
  /** Bumped on every write or drop: the snapshot writer skips an unchanged store. */
  private generation = 0;

  constructor(readonly maxKeys: number = DEFAULT_CACHE_MAX_KEYS) {
    this.lru = new LRUCache({ max: maxKeys });
  }

  get size(): number {
    return this.lru.size;
  }

  /** Changes so far (writes and drops); equal numbers mean an unchanged store. */
  get version(): number {
    return this.generation;
  }

  get(key: string): LastGoodEntry | undefined {
    return this.lru.get(key);
  }

  /** The entry without touching its LRU position (peer lookups and snapshots are not use). */
  peek(key: string): LastGoodEntry | undefined {
    return this.lru.peek(key);
  }

  set(key: string, entry: LastGoodEntry): void {
    this.lru.set(key, entry);
    this.generation += 1;
  }

  /**
   * Stores an entry learnt elsewhere (snapshot, peer) unless the key already
   * holds a value at least as young: a fresh local value always wins.
   */
  offer(key: string, entry: LastGoodEntry): boolean {
    const held = this.lru.peek(key);
    if (held !== undefined && held.atMs >= entry.atMs) return false;
    this.set(key, entry);
    return true;
  }

  /** Drops every entry of these queries (changed or removed by a reload). */
  dropQueries(names: ReadonlySet<string>): void {
    if (names.size === 0) return;
    for (const [key, entry] of this.lru.entries()) if (names.has(entry.query)) this.lru.delete(key);
    this.generation += 1;
  }

  /** Entries from least to most recently used, so a reload in this order keeps the LRU order. */
  *oldestFirst(): IterableIterator<[string, LastGoodEntry]> {
    for (const key of this.lru.rkeys()) {
      const entry = this.lru.peek(key);
      if (entry !== undefined) yield [key, entry];
    }
  }
}
