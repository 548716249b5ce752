import type { Coordinator } from '../coordinator.js';
import { keeperClaims } from './keeper-claims.js';
import type { ClaimMode, ClaimProtocol } from './protocol.js';
import { tableClaims, type ClaimTiming } from './table-claims.js';

/** The claim protocol of a mode (docs/claim-protocol.md): Keeper keys, or the table protocol. */
export function claimProtocol(mode: ClaimMode, coord: Coordinator, owner: string, timing: ClaimTiming): ClaimProtocol {
  return mode === 'keeper' ? keeperClaims(coord, { owner, leaseSeconds: timing.leaseSeconds }) : tableClaims(coord, owner, timing);
}
