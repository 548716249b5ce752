import type { ClickHouseClient } from '@clickhouse/client';
import type { LeaseRow } from '../coordinator.js';
import type { RunWindow } from '../../schedule/window.js';

/**
 * What the runner asks of a claim mode (docs/claim-protocol.md): claim a tick's
 * fires, renew a won claim, release it. Two implementations: `keeper-claims.ts`
 * (KeeperMap keys) and `table-claims.ts` (the table protocol).
 */
export type ClaimMode = 'keeper' | 'tables';
export const CLAIM_MODES: readonly ClaimMode[] = Object.freeze(['keeper', 'tables']);

/** A won claim: what its renewals and its release need. */
export interface HeldClaim {
  readonly huntId: string;
  readonly fire: number;
  /** Keeper mode: this claim's random token, the condition of its later writes; '' in table mode. */
  readonly token: string;
  /** Keeper mode: the window's start key (docs/claim-protocol.md#keeper-mode), deleted once the window is done. */
  readonly startKey?: string;
}

export type ClaimOutcome =
  /**
   * `watermark`: read after the win, for the already-run recheck. `window`: the window this
   * claim owns when the mode records it at claim time (Keeper mode: every run of one window
   * start covers the same window); absent, the run covers `[watermark, fire)`.
   * `held.fire` is the fire claimed, which may be an earlier one than requested (a retake).
   */
  | { readonly kind: 'won'; readonly watermark: number | null; readonly held: HeldClaim; readonly window?: RunWindow }
  /** Someone holds the hunt (or, Keeper mode, the fire was claimed already). */
  | { readonly kind: 'lost'; readonly holder: Pick<LeaseRow, 'owner'> | undefined }
  /**
   * Table protocol only: acknowledged `settle` or more after the free read. `releaseError`: the
   * release of its row failed, so the row may hold the hunt until its lease ends.
   */
  | { readonly kind: 'late'; readonly releaseError?: unknown }
  /** This hunt's claim failed (an error of its own; the others of the batch went on): the fire stays owed. */
  | { readonly kind: 'failed'; readonly error: unknown };

export interface ClaimRequest {
  readonly huntId: string;
  readonly fire: number;
  /** The hunt's interval: a first run (no watermark) covers `[fire − interval, fire)`. Default 0. */
  readonly intervalSeconds?: number;
}

/**
 * How a won claim ended: `succeeded` when its window is covered (this run wrote the
 * watermark, or a peer's already had), else the window stays owed as recorded.
 */
export interface ReleaseResult {
  readonly succeeded: boolean;
}

/**
 * What a renewal found: `held`, or `lost` when another runner took the hunt over
 * (Keeper mode reads its lease key back; a renewal in the table protocol is a
 * fresh row that goes back on top, so it always says `held`).
 */
export type RenewResult = 'held' | 'lost';

export interface ClaimProtocol {
  readonly mode: ClaimMode;
  claim(requests: readonly ClaimRequest[]): Promise<Map<string, ClaimOutcome>>;
  /** Extends the lease by the lease length from now, if the claim still holds it. */
  renew(held: HeldClaim): Promise<RenewResult>;
  /** Whether the claim still holds its hunt: read just before the watermark commit (a stale run stops there). */
  holds(held: HeldClaim): Promise<boolean>;
  release(held: HeldClaim, result: ReleaseResult): Promise<void>;
  /** The same protocol on another connection (an embedded session runs one query at a time). */
  on(client: ClickHouseClient): ClaimProtocol;
}
