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
  /**
   * `watermark`: read with the read-back, for the already-run recheck (step 4). `fire`: the
   * fire the row claimed when the window chain chose it (a retake), else the one requested.
   */
  | { readonly kind: 'won'; readonly watermark: number | null; readonly fire?: number }
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
export function readBackVerdict(
  rows: readonly LeaseRow[],
  owner: string,
  fire: number,
  watermark: number | null = null,
  chain?: { readonly newestBefore: string | undefined },
): ClaimOutcome {
  const [top, second] = rows;
  // With the window chain the row's fire was chosen in the insert: ours is the row of this
  // owner newer than anything the free read saw.
  const ours = chain ? top?.owner === owner && (chain.newestBefore === undefined || top.claimed > chain.newestBefore) : top?.owner === owner && top.fire === fire;
  if (!top || !ours) return { kind: 'lost', holder: top };
  if (second && second.claimed === top.claimed && second.owner !== owner) return { kind: 'lost', holder: second };
  return chain ? { kind: 'won', watermark, fire: top.fire } : { kind: 'won', watermark };
}

/**
 * How long after `ack + settle` the read-back goes, so a rival acknowledged right
 * at the edge of its own window is visible (docs/claim-protocol.md). Small next
 * to `settle`; it also absorbs timer and scheduling granularity.
 */
export const READ_BACK_MARGIN_MS = 50;

type Started = { readonly contenders: readonly ClaimRequest[]; readonly freeReadMs: number; readonly ackMs: number };

/** `chain`: the window chain picks each claim's fire in the insert (the runner's hunts; not the planner's slots). */
export async function claimFires(
  coord: Coordinator,
  owner: string,
  requests: readonly ClaimRequest[],
  timing: ClaimTiming,
  options: { readonly chain?: boolean } = {},
): Promise<Map<string, ClaimOutcome>> {
  const heads = new Map<string, string>();
  const { clock, settleMs } = timing;
  const outcomes = new Map<string, ClaimOutcome>();
  const start = async (): Promise<Started> => {
    const freeReadMs = clock.monotonicMs();
    const free = await coord.newestLeases(requests.map((r) => r.huntId));
    const contenders = requests.filter((r) => {
      const head = free.rows.get(r.huntId);
      if (head) heads.set(r.huntId, head.claimed);
      if (head && head.leaseUntil > free.nowSeconds) outcomes.set(r.huntId, { kind: 'lost', holder: head });
      return !outcomes.has(r.huntId);
    });
    if (contenders.length > 0) await coord.conditionalClaims(owner, contenders, timing.leaseSeconds, options);
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
    const chain = options.chain ? { newestBefore: heads.get(r.huntId) } : undefined;
    outcomes.set(r.huntId, readBackVerdict(seen?.rows ?? [], owner, r.fire, seen?.watermark ?? null, chain));
  }
  return outcomes;
}

/**
 * The table protocol as a `ClaimProtocol` (docs/claim-protocol.md#the-table-protocol): leases
 * are rows of hunt_lease (renewal: a fresh row; release: lease_until 0). A won claim is
 * confirmed before it runs: a fresh row of ours goes on top (above any late row, which was
 * evaluated before our claim was visible), and a read-back a settle later must still show it
 * — a takeover is then the only row that can ever sit above ours, and it runs our window.
 * A late claim's row is released at once where it is still on top, so it holds nothing for a lease.
 */
export function tableClaims(coord: Coordinator, owner: string, timing: ClaimTiming): ClaimProtocol {
  /** The newest lease row is this claim's (owner and fire), with no tie: nobody took the hunt over. */
  const holdsAll = async (held: ReadonlyArray<{ huntId: string; fire: number }>): Promise<Set<string>> => {
    const back = await coord.readBacks(held.map((h) => h.huntId));
    return new Set(held.filter((h) => readBackVerdict(back.get(h.huntId)?.rows ?? [], owner, h.fire).kind === 'won').map((h) => h.huntId));
  };
  const confirm = async (won: ReadonlyArray<{ huntId: string; fire: number }>): Promise<Set<string>> => {
    await coord.putLeasesIfNewest(owner, won, timing.leaseSeconds);
    const ackMs = timing.clock.monotonicMs();
    const waitMs = ackMs + timing.settleMs + READ_BACK_MARGIN_MS - timing.clock.monotonicMs();
    if (waitMs > 0) await timing.sleep(waitMs);
    return holdsAll(won);
  };
  return {
    mode: 'tables',
    async claim(requests) {
      const outcomes = await claimFires(coord, owner, requests, timing, { chain: true });
      const out = new Map<string, ProtocolOutcome>();
      const late: string[] = [];
      const won: Array<{ huntId: string; fire: number; watermark: number | null }> = [];
      for (const r of requests) {
        const o = outcomes.get(r.huntId);
        if (!o) continue;
        if (o.kind === 'won') won.push({ huntId: r.huntId, fire: o.fire ?? r.fire, watermark: o.watermark });
        else if (o.kind === 'late') late.push(r.huntId);
        else out.set(r.huntId, o);
      }
      // A late row may sit over a winner's claim (never over its confirmation, which is newer):
      // released at once where it is still on top. A failed release leaves it to expire, and the
      // outcome says so: the caller logs it, as that hunt waits up to a lease.
      if (late.length > 0) {
        const releaseError = await coord.releaseOwnNewest(owner, late).then(
          () => undefined,
          (err: unknown) => err ?? new Error('release failed'),
        );
        for (const huntId of late) out.set(huntId, releaseError === undefined ? { kind: 'late' } : { kind: 'late', releaseError });
      }
      if (won.length === 0) return out;
      let confirmed: Set<string>;
      try {
        confirmed = await confirm(won);
      } catch (err) {
        // The batch cannot finish: release what it won (nothing ran, so nothing is owed but the fires).
        await coord.putLeasesIfNewest(owner, won, 'release').catch(() => undefined);
        throw err;
      }
      for (const w of won) {
        out.set(
          w.huntId,
          confirmed.has(w.huntId) ? { kind: 'won', watermark: w.watermark, held: { huntId: w.huntId, fire: w.fire, token: '' } } : { kind: 'lost', holder: undefined },
        );
      }
      return out;
    },
    // After the confirmation only a takeover sits above our rows. Renewal and release are
    // conditional in the statement that writes them (newest row ours, that fire): a runner
    // paused anywhere — even between a look and a write — never puts its row over the taker's,
    // which would hide the taker's lease and, with a stale fire on top, the window chain.
    async renew(held) {
      await coord.putLeasesIfNewest(owner, [held], timing.leaseSeconds);
      return (await holdsAll([held])).has(held.huntId) ? 'held' : 'lost';
    },
    holds: async (held) => (await holdsAll([held])).has(held.huntId),
    release: (held) => coord.putLeasesIfNewest(owner, [held], 'release'),
    on: (client) => tableClaims(coord.withClient(client), owner, timing),
  };
}
