/**
 * Which offsets the planner tries for one hunt (docs/smoothing.md "Candidate offsets").
 *
 * J depends on an offset φ only through the buckets its fires land in, floor((φ + kT) / Δ),
 * and on which fires exist (φ + kT < H). So J is constant on runs of offsets between
 * "breakpoints": offsets where some fire crosses into the next bucket (φ ≡ −kT mod Δ) or where
 * a fire drops off the end of a capped hyperperiod (φ = H mod T). One offset per run is
 * enough, and we take the run's START: there a fire begins at the start of its bucket, so the
 * real run (up to d·Δ long) lies in the buckets the model gives it. (The run's other end would
 * be a move of one second that only the model believes in.) For the usual periods (multiples
 * of Δ) that is one candidate per bucket of drift, ≈ 2·max_step/Δ in all (about 60 for
 * T = 3600 s, max_step T/4, Δ 30 s) instead of 2·max_step one-second steps.
 */

/** Shortest distance from a to b going either way round a circle of length `period`. */
export function circularDistance(a: number, b: number, period: number): number {
  const d = Math.abs(a - b) % period;
  return Math.min(d, period - d);
}

/** max_step = max(1, floor(T × fraction)). */
export function maxStepSeconds(periodSeconds: number, fraction: number): number {
  return Math.max(1, Math.floor(periodSeconds * fraction));
}

/** The offsets within `maxStep` of `offset` (circular in [0, T)) as inclusive linear ranges. */
function windowRanges(offset: number, period: number, maxStep: number): Array<[number, number]> {
  if (2 * maxStep + 1 >= period) return [[0, period - 1]];
  const lo = offset - maxStep;
  const hi = offset + maxStep;
  if (lo < 0) return [[lo + period, period - 1], [0, hi]];
  if (hi >= period) return [[lo, period - 1], [0, hi - period]];
  return [[lo, hi]];
}

/** Residues r (mod Δ) at which some fire changes bucket: φ ≡ −kT (mod Δ). */
function bucketResidues(period: number, bucketSeconds: number, hyperperiod: number): number[] {
  if (period % bucketSeconds === 0) return [0]; // the usual case: every fire changes bucket together
  const fires = Math.max(1, Math.ceil(hyperperiod / period));
  const residues = new Set<number>();
  // kT mod Δ repeats with period Δ / gcd(T, Δ) ≤ Δ, so at most Δ distinct values.
  for (let k = 0; k < Math.min(fires, bucketSeconds); k++) {
    residues.add((((-k * period) % bucketSeconds) + bucketSeconds) % bucketSeconds);
  }
  return [...residues];
}

/**
 * Candidate offsets for a hunt at `offset`: the start of each run of equal J inside the
 * window (cut to the window), except the run that holds `offset` itself.
 */
export function candidateOffsets(
  offset: number,
  period: number,
  maxStep: number,
  bucketSeconds: number,
  hyperperiod: number,
): number[] {
  const residues = bucketResidues(period, bucketSeconds, hyperperiod);
  const dropOff = hyperperiod % period; // a fire exists iff φ + kT < H: changes at φ = H mod T
  const out: number[] = [];
  for (const [a, b] of windowRanges(offset, period, maxStep)) {
    const breaks = [a];
    for (const r of residues) {
      for (let x = a + 1 + ((((r - a - 1) % bucketSeconds) + bucketSeconds) % bucketSeconds); x <= b; x += bucketSeconds) {
        breaks.push(x);
      }
    }
    if (dropOff > a && dropOff <= b) breaks.push(dropOff);
    if (residues.length > 1 || breaks[breaks.length - 1] === dropOff) breaks.sort((x, y) => x - y);
    for (let i = 0; i < breaks.length; i++) {
      const start = breaks[i] as number;
      if (i > 0 && start === breaks[i - 1]) continue;
      let end = b;
      for (let j = i + 1; j < breaks.length && end === b; j++) {
        if ((breaks[j] as number) > start) end = (breaks[j] as number) - 1;
      }
      if (offset < start || offset > end) out.push(start);
    }
  }
  return out;
}
