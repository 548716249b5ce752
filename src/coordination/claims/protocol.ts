import type { ClickHouseClient } from '@clickhouse/client';
import type { LeaseRow } from '../coordinator.js';

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
}

export type ClaimOutcome =
  /** `watermark`: read after the win, for the already-run recheck and the run's window. */
  | { readonly kind: 'won'; readonly watermark: number | null; readonly held: HeldClaim }
  /** Someone holds the hunt (or, Keeper mode, the fire was claimed already). */
  | { readonly kind: 'lost'; readonly holder: Pick<LeaseRow, 'owner'> | undefined }
  /** Table protocol only: acknowledged `settle` or more after the free read. */
  | { readonly kind: 'late' };

export interface ClaimRequest {
  readonly huntId: string;
  readonly fire: number;
}

/** How a won claim ended: `succeeded` after the watermark write (the fire ran), else `failed`. */
export interface ReleaseResult {
  readonly succeeded: boolean;
  /** The watermark the run started from: the previous successful fire (Keeper mode deletes its record). */
  readonly previousFire: number | null;
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
  release(held: HeldClaim, result: ReleaseResult): Promise<void>;
  /** The same protocol on another connection (an embedded session runs one query at a time). */
  on(client: ClickHouseClient): ClaimProtocol;
}
