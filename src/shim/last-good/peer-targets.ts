import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Where the peer replicas are (docs/failsafe.md#snapshot-and-peers): each
 * configured URL's host resolved to ALL its addresses (the chart's headless
 * Service name gives one per ready pod), minus this process itself. Resolved
 * again at most every `ttlMs`, so pods that come and go are followed.
 */
export interface PeerTarget {
  /** `http://10.1.2.3:8080`, the address a request goes to. */
  readonly base: string;
  /** The configured host, for TLS server-name checks and the Host header. */
  readonly host: string;
}

export type Resolve = (host: string) => Promise<readonly string[]>;

const resolveAll: Resolve = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

/** Whether an address names this machine (a loopback or one of its interfaces). */
export function isLocalAddress(address: string, local: ReadonlySet<string> = localAddresses()): boolean {
  return address === '0.0.0.0' || address === '::' || address.startsWith('127.') || address === '::1' || local.has(address);
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(a.address);
  return out;
}

export class PeerTargets {
  private cached: { readonly atMs: number; readonly targets: readonly PeerTarget[] } | undefined;
  private resolving: Promise<readonly PeerTarget[]> | undefined;

  constructor(
    private readonly urls: readonly string[],
    /** The port this shim listens on: a local address on it is self. */
    private readonly selfPort: () => number,
    private readonly nowMs: () => number,
    private readonly ttlMs = 5_000,
    private readonly resolve: Resolve = resolveAll,
  ) {}

  get configured(): boolean {
    return this.urls.length > 0;
  }

  /** The current peers; an unresolvable host contributes none (its peers are simply not asked). */
  async current(): Promise<readonly PeerTarget[]> {
    if (this.cached !== undefined && this.nowMs() - this.cached.atMs < this.ttlMs) return this.cached.targets;
    this.resolving ??= this.resolveNow().finally(() => {
      this.resolving = undefined;
    });
    return this.resolving;
  }

  private async resolveNow(): Promise<readonly PeerTarget[]> {
    const local = localAddresses();
    const seen = new Set<string>();
    const targets: PeerTarget[] = [];
    for (const raw of this.urls) {
      const url = new URL(raw);
      const host = url.hostname.replace(/^\[|\]$/g, '');
      const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
      const addresses = isIP(host) ? [host] : await this.resolve(host).catch(() => []);
      for (const address of addresses) {
        if (port === this.selfPort() && isLocalAddress(address, local)) continue;
        const base = `${url.protocol}//${isIP(address) === 6 ? `[${address}]` : address}:${port}`;
        if (seen.has(base)) continue;
        seen.add(base);
        targets.push({ base, host });
      }
    }
    this.cached = { atMs: this.nowMs(), targets };
    return targets;
  }
}
