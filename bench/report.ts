/**
 * One line per figure, each with the baseline measured in the same run and
 * whether its goal was met; the same lines go to docs/performance.md.
 *
 * A noisy figure (one measured over rounds) carries its `spreads`: min / median / max of the
 * rounds, made with `spread(values, label, unit)`; its verdict must use `.median`, never the
 * best round. `headline` and `shortName` are what the README's table shows (bench/docs.ts).
 * `npm run bench` fails when a figure's outcome is 'NOT met' or a section returns 'skipped';
 * an 'n/a' outcome puts why there is no goal in `goal`.
 */
export type GoalOutcome = 'met' | 'NOT met' | 'n/a';

/** min / median / max of a figure's rounds, and how many rounds. */
export interface Spread {
  readonly label: string;
  /** Unit for printing: 'ms', '×', 'MB', 'req/s', or '' for a bare number. */
  readonly unit: string;
  readonly min: number;
  readonly median: number;
  readonly max: number;
  readonly rounds: number;
}

export interface Figure {
  readonly name: string;
  /** What was measured, with units. */
  readonly measured: string;
  /** The same-run baseline it is compared with, or what it is bounded by. */
  readonly baseline: string;
  /** The goal, or for an 'n/a' outcome why the figure has none (printed either way). */
  readonly goal: string;
  readonly outcome: GoalOutcome;
  /** The rounds of a noisy figure (printed after the line); the verdict is on each median. */
  readonly spreads?: readonly Spread[];
  /** A short result for the README's performance table (bench/docs.ts); else the README shows `measured`. */
  readonly headline?: string;
  /** A short name for the README's table; else `name`. */
  readonly shortName?: string;
}

export interface Skipped {
  readonly name: string;
  readonly reason: string;
}

export type BenchLine = ({ readonly kind: 'figure' } & Figure) | ({ readonly kind: 'skipped' } & Skipped);

export function goal(met: boolean): GoalOutcome {
  return met ? 'met' : 'NOT met';
}

/** `spread(rounds, 'cycle CPU', 'ms')`: the min / median / max of the rounds of a noisy figure. */
export function spread(values: readonly number[], label: string, unit: string): Spread {
  if (values.length === 0) throw new Error(`spread of "${label}": no rounds`);
  return { label, unit, min: Math.min(...values), median: median(values), max: Math.max(...values), rounds: values.length };
}

export function formatNumber(n: number, unit: string): string {
  if (unit === 'ms') return ms(n);
  if (unit === 'MB') return mb(n);
  if (unit === '×') return `${n.toFixed(2)}×`;
  if (unit === 'req/s') return `${int(n)} req/s`;
  return Number.isInteger(n) || Math.abs(n) >= 100 ? int(n) : n.toFixed(3);
}

/** `cycle CPU median 8.1 ms (min 7.9 ms, max 9.2 ms, 5 rounds)`. */
export function formatSpread(s: Spread): string {
  const f = (n: number) => formatNumber(n, s.unit);
  return `${s.label} median ${f(s.median)} (min ${f(s.min)}, max ${f(s.max)}, ${s.rounds} rounds)`;
}

export function formatLine(line: BenchLine): string {
  if (line.kind === 'skipped') return `${line.name}: skipped (${line.reason})`;
  const noGoal = line.goal === '' || line.goal === 'n/a';
  const goalText = line.outcome === 'n/a' ? `goal: n/a${noGoal ? '' : ` (${line.goal})`}` : `goal: ${line.outcome} (${line.goal})`;
  const spreads = line.spreads?.length ? ` | spread: ${line.spreads.map(formatSpread).join('; ')}` : '';
  return `${line.name}: ${line.measured} | baseline: ${line.baseline} | ${goalText}${spreads}`;
}

/** A run passes when every figure that has a goal met it and no section was skipped or failed. */
export function runPassed(lines: readonly BenchLine[]): boolean {
  return lines.length > 0 && lines.every((l) => l.kind === 'figure' && l.outcome !== 'NOT met');
}

export function summary(lines: readonly BenchLine[]): string {
  const figures = lines.filter((l): l is { kind: 'figure' } & Figure => l.kind === 'figure');
  const met = figures.filter((f) => f.outcome === 'met').length;
  const notMet = figures.filter((f) => f.outcome === 'NOT met').map((f) => f.name);
  const skipped = lines.length - figures.length;
  const skippedNames = lines.filter((l) => l.kind === 'skipped').map((l) => l.name);
  return (
    `summary: ${figures.length} figure(s), ${met} goal(s) met, ${notMet.length} NOT met` +
    (notMet.length > 0 ? ` (${notMet.join('; ')})` : '') +
    `, ${skipped} skipped` +
    (skipped > 0 ? ` (${skippedNames.join('; ')})` : '')
  );
}

export const ms = (n: number): string => `${n.toFixed(n < 10 ? 2 : 0)} ms`;
export const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
export const int = (n: number): string => Math.round(n).toLocaleString('en-US');

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? 0;
}
