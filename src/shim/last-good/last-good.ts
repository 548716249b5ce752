import type { Registry } from 'prom-client';
import type { CompiledQuery } from '../../catalogue/types.js';
import type { Clock } from '../../clock.js';
import type { ShimConfig } from '../../config/load.js';
import type { Logger } from '../../log.js';
import { ageSeconds } from '../value.js';
import { PeerClient } from './peer-client.js';
import { PeerLookup } from './peer-lookup.js';
import { PeerTargets } from './peer-targets.js';
import { LastGoodSnapshot } from './snapshot.js';
import { LastGoodStore, type LastGoodEntry } from './store.js';

/**
 * The last-good cache with what keeps it across restarts and replicas
 * (docs/failsafe.md#snapshot-and-peers): the bounded store, its disk snapshot
 * (when a directory is set) and the peer lookup (when peers are set).
 */
export interface LastGoodOptions {
  readonly shim: Pick<ShimConfig, 'cacheMaxKeys' | 'auth' | 'tls' | 'port' | 'lastGood'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: Registry;
  /** The port the shim listens on once it does (self is not a peer). */
  readonly selfPort?: () => number;
}

/** What askPeersAhead hands back without peers: one function, not one per fresh answer. */
const nothingToCancel = (): void => undefined;

export class LastGood {
  readonly store: LastGoodStore;
  readonly snapshot: LastGoodSnapshot | undefined;
  private readonly peers: PeerLookup | undefined;
  private readonly clock: Clock;
  private readonly peerTimeoutMs: number;

  constructor(options: LastGoodOptions) {
    const { shim, clock, logger, registry } = options;
    const settings = shim.lastGood;
    this.clock = clock;
    this.peerTimeoutMs = settings.peerTimeoutMs;
    this.store = new LastGoodStore(shim.cacheMaxKeys);
    this.snapshot =
      settings.snapshotDir === undefined
        ? undefined
        : new LastGoodSnapshot({ dir: settings.snapshotDir, intervalMs: settings.snapshotIntervalMs, store: this.store, clock, logger });
    this.peers =
      settings.peers.length === 0
        ? undefined
        : new PeerLookup({
            targets: new PeerTargets(settings.peers, options.selfPort ?? (() => shim.port), () => clock.nowMs()),
            client: new PeerClient(shim),
            clock,
            logger,
            registry,
            timeoutMs: settings.peerTimeoutMs,
          });
  }

  /** Reads the snapshot (if any) into the store, then starts its periodic writes. */
  async open(fingerprintOf: (query: string) => string | undefined): Promise<void> {
    if (this.snapshot === undefined) return;
    await this.snapshot.restore(fingerprintOf);
    this.snapshot.start();
  }

  /** A peer's entry of a cold key within `budgetMs`, stored locally when found; undefined without peers. */
  async fromPeers(query: CompiledQuery, key: string, budgetMs: number): Promise<LastGoodEntry | undefined> {
    if (this.peers === undefined) return undefined;
    const entry = await this.peers.find(query, key, budgetMs);
    if (entry !== undefined) this.store.offer(key, entry);
    return entry;
  }

  /**
   * For a cold key whose query is still running: asks the peers in the last
   * part of the deadline (its last half at most, at most the peer timeout), so
   * a hung ClickHouse that uses up the whole deadline still leaves them time;
   * the failure path then joins this lookup. Returns a cancel (the query
   * answered first). A no-op without peers.
   */
  askPeersAhead(query: CompiledQuery, key: string): () => void {
    if (this.peers === undefined) return nothingToCancel;
    const budgetMs = Math.min(this.peerTimeoutMs, Math.floor(query.deadlineMs / 2));
    const timer = setTimeout(() => void this.fromPeers(query, key, budgetMs), query.deadlineMs - budgetMs);
    return () => clearTimeout(timer);
  }

  /**
   * What the internal route answers a peer: this key's entry, if it was made
   * by the same compiled definition as the asker's and the live one here.
   */
  forPeer(live: CompiledQuery | undefined, fingerprint: string, key: string): { value: number; ageSeconds: number } | undefined {
    const entry = this.store.peek(key);
    if (live === undefined || entry === undefined) return undefined;
    if (live.fingerprint !== fingerprint || entry.query !== live.name || entry.fingerprint !== fingerprint) return undefined;
    return { value: entry.value, ageSeconds: ageSeconds(entry.atMs, this.clock.nowMs()) };
  }

  /** Writes the snapshot a last time and closes peer sockets. */
  async close(): Promise<void> {
    this.peers?.close();
    await this.snapshot?.close();
  }
}
