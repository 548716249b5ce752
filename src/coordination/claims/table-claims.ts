import type { Clock } from '../../clock.js';
import type { Coordinator, LeaseRow } from '../coordinator.js';
import type { ClaimProtocol, ClaimOutcome as ProtocolOutcome, ClaimRequest } from './protocol.js';

export type { ClaimRequest } from './protocol.js';

/**
 * The table protocol (docs/claim-protocol.md#the-claim says why at most one
 * claim stands, and when a run is exactly-once):
 *
 *   free read → conditional insert → wait → read back the newest lease row.
 *
 * The claim stands only if the insert was acknowledged STRICTLY less than
 * `settle` after the free read (`ack − free read < settle`; at exactly `settle`
 * it is late) AND the read-back shows this owner and fire. The read-back waits
 * until `settle` + READ_BACK_MARGIN_MS after our own acknowledgement (which is
 * also past `settle` after the free read, the protocol's stated bound): any competing claim
 * that can still stand started its free read before our row was visible, so it
 * is acknowledged by then and the read-back sees it. Both durations are read on
 * the injected clock's MONOTONIC reading, so a wall-clock step (NTP) can neither
 * make a late acknowledgement look in time nor cut the wait short.
 *
 * "Live" means the NEWEST lease row has lease_until > now, whoever owns it:
 * that is all a ReplacingMergeTree ordered by hunt_id keeps after a merge.
 * A late claim is not released (it may sit over the winner, whose next renewal
 * goes back on top); it holds the hunt until the winner renews or releases, or
 * it expires, and its owner claims again at a later poll like anyone else.
 *
 * One tick's claims go as one batch: one free read, one conditional insert and
 * one read-back for all of them, each hunt judged on its own rows, so the cost
 * of a tick does not grow with the number of hunts it starts.
 */
export type ClaimOutcome =
  /** `watermark`: read with the read-back, for the already-run recheck (step 4). */
  | { readonly kind: 'won'; readonly watermark: number | null }
  /** A live lease at the free read, or the read-back shows another claim on top. */
  | { readonly kind: 'lost'; readonly holder: LeaseRow | undefined }
  /** Our insert was acknowledged `settle` or more after the free read. */
  | { readonly kind: 'late' };

export interface ClaimTiming {
  readonly leaseSeconds: number;
  readonly settleMs: number;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
  /**
   * Runs the free read and the conditional insert (the part whose duration
   * decides "late"). The embedded backend serialises them process-wide, so a
   * claim queues BEFORE its free read, not between it and its acknowledgement.
   */
  readonly claimStart?: <T>(fn: () => Promise<T>) => Promise<T>;
}

/**
 * Read-back verdict. A tie on `claimed` with another owner loses too: a merge
 * of the ReplacingMergeTree may keep either tied row, so two readers could see
 * different winners; losing both only delays the fire to a later poll.
 */
export function readBackVerdict(rows: readonly LeaseRow[], owner: string, fire: number, watermark: number | null = null): ClaimOutcome {
  const [top, second] = rows;
  if (!top || top.owner !== owner || top.fire !== fire) return { kind: 'lost', holder: top };
  if (second && second.claimed === top.claimed && second.owner !== owner) return { kind: 'lost', holder: second };
  return { kind: 'won', watermark };
}

/**
 * How long after `ack + settle` the read-back goes, so a rival acknowledged right
 * at the edge of its own window is visible (docs/claim-protocol.md). Small next
 * to `settle`; it also absorbs timer and scheduling granularity.
 */
export const READ_BACK_MARGIN_MS = 50;

type Started = { readonly contenders: readonly ClaimRequest[]; readonly freeReadMs: number; readonly ackMs: number };

export async function claimFires(
  coord: Coordinator,
  owner: string,
  requests: readonly ClaimRequest[],
  timing: ClaimTiming,
): Promise<Map<string, ClaimOutcome>> {
  const { clock, settleMs } = timing;
  const outcomes = new Map<string, ClaimOutcome>();
  const start = async (): Promise<Started> => {
    const freeReadMs = clock.monotonicMs();
    const free = await coord.newestLeases(requests.map((r) => r.huntId));
    const contenders = requests.filter((r) => {
      const head = free.rows.get(r.huntId);
      if (head && head.leaseUntil > free.nowSeconds) outcomes.set(r.huntId, { kind: 'lost', holder: head });
      return !outcomes.has(r.huntId);
    });
    if (contenders.length > 0) await coord.conditionalClaims(owner, contenders, timing.leaseSeconds);
    return { contenders, freeReadMs, ackMs: clock.monotonicMs() };
  };
  const { contenders, freeReadMs, ackMs } = timing.claimStart ? await timing.claimStart(start) : await start();
  if (contenders.length === 0) return outcomes;
  if (ackMs - freeReadMs >= settleMs) {
    for (const r of contenders) outcomes.set(r.huntId, { kind: 'late' });
    return outcomes;
  }
  // ackMs + settle is also ≥ settle after the free read, the protocol's stated bound.
  const waitMs = ackMs + settleMs + READ_BACK_MARGIN_MS - clock.monotonicMs();
  if (waitMs > 0) await timing.sleep(waitMs);
  const back = await coord.readBacks(contenders.map((r) => r.huntId));
  for (const r of contenders) {
    const seen = back.get(r.huntId);
    outcomes.set(r.huntId, readBackVerdict(seen?.rows ?? [], owner, r.fire, seen?.watermark ?? null));
  }
  return outcomes;
}

/** The table protocol as a `ClaimProtocol`: leases are rows of hunt_lease (renewal: a fresh row; release: lease_until 0). */
export function tableClaims(coord: Coordinator, owner: string, timing: ClaimTiming): ClaimProtocol {
  return {
    mode: 'tables',
    async claim(requests) {
      const outcomes = await claimFires(coord, owner, requests, timing);
      const out = new Map<string, ProtocolOutcome>();
      for (const r of requests) {
        const o = outcomes.get(r.huntId);
        if (!o) continue;
        out.set(r.huntId, o.kind === 'won' ? { ...o, held: { huntId: r.huntId, fire: r.fire, token: '' } } : o);
      }
      return out;
    },
    // A renewal is a fresh row that goes back on top: that is how a winner buried under a
    // late claim's row surfaces again, so a row of another owner on top cannot be told from
    // a takeover, and the table protocol says `held` (docs/claim-protocol.md#the-table-protocol).
    renew: (held) => coord.putLease(held.huntId, owner, held.fire, timing.leaseSeconds).then(() => 'held' as const),
    holds: async () => true,
    release: (held) => coord.putLease(held.huntId, owner, held.fire, 'release'),
    on: (client) => tableClaims(coord.withClient(client), owner, timing),
  };
}
