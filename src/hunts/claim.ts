import type { Clock } from '../clock.js';
import type { Coordinator, LeaseRow } from './coordination.js';

/**
 * The claim protocol (SPEC §7.6 step 3; docs/claim-protocol.md says why it is
 * exactly-once and when):
 *
 *   free read → conditional insert → wait → read back the newest lease row.
 *
 * The claim stands only if the insert was acknowledged within `settle` of the
 * free read AND the read-back shows this owner and fire. The read-back waits
 * until `settle` after the free read (the SPEC's bound) and, on top of that,
 * until `settle` after our own acknowledgement: any competing claim that can
 * still stand started its free read before our row was visible, so it is
 * acknowledged by then and the read-back sees it.
 *
 * "Live" means the NEWEST lease row has lease_until > now, whoever owns it:
 * that is all a ReplacingMergeTree ordered by hunt_id keeps after a merge.
 * A late claim is not released (it may sit over the winner, whose next renewal
 * goes back on top); it holds the hunt until the winner renews or releases, or
 * it expires, and its owner claims again at a later poll like anyone else.
 */
export type ClaimOutcome =
  | { readonly kind: 'won' }
  /** A live lease of another owner at the free read, or the read-back shows another claim on top. */
  | { readonly kind: 'lost'; readonly holder: LeaseRow | undefined }
  /** Our insert was acknowledged more than `settle` after the free read. */
  | { readonly kind: 'late' };

export interface ClaimTiming {
  readonly leaseSeconds: number;
  readonly settleMs: number;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
}

/**
 * Read-back verdict. A tie on `claimed` with another owner loses too: a merge
 * of the ReplacingMergeTree may keep either tied row, so two readers could see
 * different winners; losing both only delays the fire to the next poll.
 */
export function readBackVerdict(rows: readonly LeaseRow[], owner: string, fire: number): ClaimOutcome {
  const [top, second] = rows;
  if (!top || top.owner !== owner || top.fire !== fire) return { kind: 'lost', holder: top };
  if (second && second.claimed === top.claimed && second.owner !== owner) return { kind: 'lost', holder: second };
  return { kind: 'won' };
}

export async function claimFire(coord: Coordinator, huntId: string, owner: string, fire: number, timing: ClaimTiming): Promise<ClaimOutcome> {
  const { clock, settleMs } = timing;
  const freeReadMs = clock.nowMs();
  const free = await coord.newestLeases(huntId, 1);
  const head = free.rows[0];
  if (head && free.nowSeconds !== undefined && head.leaseUntil > free.nowSeconds) return { kind: 'lost', holder: head };
  await coord.conditionalClaim(huntId, owner, fire, timing.leaseSeconds);
  const ackMs = clock.nowMs();
  if (ackMs - freeReadMs > settleMs) return { kind: 'late' };
  // ackMs + settle is also ≥ settle after the free read, the SPEC's bound.
  const waitMs = ackMs + settleMs - clock.nowMs();
  if (waitMs > 0) await timing.sleep(waitMs);
  const back = await coord.newestLeases(huntId, 2);
  return readBackVerdict(back.rows, owner, fire);
}
