import { DfeError } from '../../errors.js';

/**
 * Pure: which faults `verify-coordination --nemesis` injects, when, and for how long
 * (docs/operations.md#the-nemesis). A seeded generator makes a run repeatable: the same seed,
 * kinds, run length and lease give the same plan (the runner each fault lands on is picked
 * at injection time, among those not already under a fault, from the same generator).
 */
export const FAULT_KINDS = ['pause', 'cpu', 'stall', 'kill'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  /** Milliseconds after the runners started. */
  readonly atMs: number;
  readonly kind: FaultKind;
  /** How long the fault lasts: SIGSTOP to SIGCONT, the hogs' life, the stall, SIGKILL to restart. */
  readonly durationMs: number;
  /** 0–1: picks the target among the runners free at injection time. */
  readonly pick: number;
}

export interface FaultPlanOptions {
  readonly seed: number;
  readonly kinds: readonly FaultKind[];
  readonly runMs: number;
  readonly leaseSeconds: number;
}

/** `pause,cpu` → ['pause', 'cpu']; an unknown or repeated kind, or none, is a usage error naming it. */
export function parseFaultKinds(raw: string): FaultKind[] {
  const kinds = raw.split(',').map((k) => k.trim()).filter((k) => k.length > 0);
  if (kinds.length === 0) throw new DfeError('USAGE', `--nemesis needs one or more of ${FAULT_KINDS.join(',')}, got ${JSON.stringify(raw)}`);
  for (const k of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(k)) {
      throw new DfeError('USAGE', `--nemesis: unknown fault ${JSON.stringify(k)} in ${JSON.stringify(raw)}; known: ${FAULT_KINDS.join(', ')}`, { key: 'nemesis', value: raw });
    }
  }
  if (new Set(kinds).size !== kinds.length) throw new DfeError('USAGE', `--nemesis names a fault twice: ${JSON.stringify(raw)}`, { key: 'nemesis', value: raw });
  return kinds as FaultKind[];
}

/** mulberry32: a small seeded generator of floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * How long each kind lasts, from the lease: a pause outlives twice the lease (its claims
 * expire and are retaken while it sleeps); hogs and a stall last as long; a killed runner
 * comes back after one second.
 */
export function faultDurationMs(kind: FaultKind, leaseSeconds: number): number {
  const lease = leaseSeconds * 1000;
  if (kind === 'pause') return 2 * lease + 1000;
  if (kind === 'cpu') return 2 * lease;
  if (kind === 'stall') return 2 * lease;
  return 1000;
}

/**
 * One fault per 10 s of run, at least one of each kind: each kind once in a shuffled order,
 * then kinds drawn at random. The run is cut into equal slots, one fault starting at a random
 * moment in the first half of its slot, the first after 2 s (the runners have ticked).
 */
export function planFaults(options: FaultPlanOptions): PlannedFault[] {
  const random = seededRandom(options.seed);
  const count = Math.max(options.kinds.length, Math.floor(options.runMs / 10_000));
  const shuffled = [...options.kinds];
  for (let i = shuffled.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j] as FaultKind, shuffled[i] as FaultKind];
  }
  const startMs = 2000;
  const slotMs = Math.max(0, options.runMs - startMs) / count;
  const plan: PlannedFault[] = [];
  for (let i = 0; i < count; i += 1) {
    const kind = shuffled[i] ?? (options.kinds[Math.floor(random() * options.kinds.length)] as FaultKind);
    const atMs = Math.round(startMs + i * slotMs + random() * (slotMs / 2));
    plan.push({ atMs, kind, durationMs: faultDurationMs(kind, options.leaseSeconds), pick: random() });
  }
  return plan;
}
