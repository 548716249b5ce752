import { Counter, type Registry } from 'prom-client';
import type { CompiledQuery } from '../../catalogue/types.js';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import type { PeerClient, PeerReply } from './peer-client.js';
import type { PeerTargets } from './peer-targets.js';
import type { LastGoodEntry } from './store.js';

/**
 * Asks the peer replicas for a key's last-good entry (docs/failsafe.md#snapshot-and-peers),
 * used only for a cold key while ClickHouse is failing. Bounded: at most
 * PEER_FANOUT peers per lookup, MAX_PEER_LOOKUPS lookups at once (past it: `skipped`),
 * one lookup per key at a time, and the caller's time budget. The youngest
 * entry found wins; its age comes from the peer (no clock comparison).
 */
export const PEER_FANOUT = 4;
export const MAX_PEER_LOOKUPS = 64;

export const PEER_OUTCOMES = ['found', 'not_found', 'error', 'skipped', 'no_peers'] as const;
export type PeerOutcome = (typeof PEER_OUTCOMES)[number];

export interface PeerLookupOptions {
  readonly targets: PeerTargets;
  readonly client: PeerClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: Registry;
  /** Most time a lookup takes, whatever the query's deadline leaves. */
  readonly timeoutMs: number;
}

export class PeerLookup {
  private readonly lookups: Counter<'outcome'>;
  private readonly pending = new Map<string, Promise<LastGoodEntry | undefined>>();

  constructor(private readonly options: PeerLookupOptions) {
    this.lookups = new Counter({
      name: 'dfe_keda_shim_peer_lookups_total',
      help: 'Lookups of a cold key at the peer replicas during a ClickHouse failure, by outcome.',
      labelNames: ['outcome'],
      registers: [options.registry],
    });
    for (const outcome of PEER_OUTCOMES) this.lookups.inc({ outcome }, 0);
  }

  /** The youngest peer entry of the key within `budgetMs` (capped by the timeout setting), or undefined. */
  find(query: CompiledQuery, key: string, budgetMs: number): Promise<LastGoodEntry | undefined> {
    const joined = this.pending.get(key);
    if (joined !== undefined) return joined;
    if (this.pending.size >= MAX_PEER_LOOKUPS) {
      this.lookups.inc({ outcome: 'skipped' });
      return Promise.resolve(undefined);
    }
    const lookup = this.run(query, key, Math.min(budgetMs, this.options.timeoutMs)).finally(() => this.pending.delete(key));
    this.pending.set(key, lookup);
    return lookup;
  }

  close(): void {
    this.options.client.close();
  }

  private async run(query: CompiledQuery, key: string, budgetMs: number): Promise<LastGoodEntry | undefined> {
    const { targets, client, clock, logger } = this.options;
    // No time left (the deadline went waiting on ClickHouse): no lookup happens, none is counted.
    if (budgetMs <= 0) return undefined;
    const startMs = clock.monotonicMs();
    const peers = (await targets.current()).slice(0, PEER_FANOUT);
    if (peers.length === 0) {
      this.lookups.inc({ outcome: 'no_peers' });
      return undefined;
    }
    const left = Math.max(1, budgetMs - (clock.monotonicMs() - startMs));
    const search = new URLSearchParams({ query: query.name, fingerprint: query.fingerprint, key });
    const replies: PeerReply[] = await Promise.all(peers.map((peer) => client.ask(peer, search, left)));
    let best: { value: number; ageSeconds: number } | undefined;
    for (const reply of replies) if (reply.kind === 'found' && (best === undefined || reply.entry.ageSeconds < best.ageSeconds)) best = reply.entry;
    if (best !== undefined) {
      this.lookups.inc({ outcome: 'found' });
      return { query: query.name, fingerprint: query.fingerprint, value: best.value, atMs: clock.nowMs() - Math.round(best.ageSeconds * 1000) };
    }
    const failed = replies.filter((r): r is Extract<PeerReply, { kind: 'error' }> => r.kind === 'error');
    if (failed.length > 0) {
      this.lookups.inc({ outcome: 'error' });
      logger.debug({ query: query.name, errors: failed.map((f) => f.message) }, 'peer last-good lookup failed');
    } else this.lookups.inc({ outcome: 'not_found' });
    return undefined;
  }
}
