/**
 * One line per figure, each with the baseline measured in the same run and
 * whether its goal was met; the same lines go to docs/performance.md.
 */
export type GoalOutcome = 'met' | 'NOT met' | 'n/a';

export interface Figure {
  readonly name: string;
  /** What was measured, with units. */
  readonly measured: string;
  /** The same-run baseline it is compared with, or what it is bounded by. */
  readonly baseline: string;
  readonly goal: string;
  readonly outcome: GoalOutcome;
}

export interface Skipped {
  readonly name: string;
  readonly reason: string;
}

export type BenchLine = ({ readonly kind: 'figure' } & Figure) | ({ readonly kind: 'skipped' } & Skipped);

export function goal(met: boolean): GoalOutcome {
  return met ? 'met' : 'NOT met';
}

export function formatLine(line: BenchLine): string {
  if (line.kind === 'skipped') return `${line.name}: skipped (${line.reason})`;
  const goalText = line.outcome === 'n/a' ? 'goal: n/a' : `goal: ${line.outcome} (${line.goal})`;
  return `${line.name}: ${line.measured} | baseline: ${line.baseline} | ${goalText}`;
}

export function summary(lines: readonly BenchLine[]): string {
  const figures = lines.filter((l): l is { kind: 'figure' } & Figure => l.kind === 'figure');
  const met = figures.filter((f) => f.outcome === 'met').length;
  const notMet = figures.filter((f) => f.outcome === 'NOT met').map((f) => f.name);
  const skipped = lines.length - figures.length;
  return (
    `summary: ${figures.length} figure(s), ${met} goal(s) met, ${notMet.length} NOT met` +
    (notMet.length > 0 ? ` (${notMet.join('; ')})` : '') +
    `, ${skipped} skipped`
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
