/**
 * `dfe-hunt-runner doctor`'s report (docs/operations.md#doctor): one line per check, each with
 * its status and, where it is not ok, the fix. Pure: checks in, text or JSON out.
 */
export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface CheckResult {
  readonly name: string;
  readonly status: CheckStatus;
  readonly detail: string;
  /** What the operator does about a warn or a fail. */
  readonly fix?: string;
}

export interface DoctorReport {
  readonly target: string;
  readonly checks: readonly CheckResult[];
}

export function failed(report: DoctorReport): CheckResult[] {
  return report.checks.filter((c) => c.status === 'fail');
}

/** The table an operator reads: name, status, detail; a fix line under each warn or fail. */
export function formatDoctor(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length), 5);
  const lines = [`doctor: ${report.target}`, `${'check'.padEnd(width)}  status  detail`];
  for (const c of report.checks) {
    lines.push(`${c.name.padEnd(width)}  ${c.status.padEnd(6)}  ${c.detail}`);
    if (c.fix !== undefined && c.status !== 'ok') lines.push(`${''.padEnd(width)}          fix: ${c.fix}`);
  }
  const failing = failed(report);
  const warns = report.checks.filter((c) => c.status === 'warn').length;
  lines.push(
    failing.length === 0
      ? `${report.checks.length} check(s): no failure${warns > 0 ? `, ${warns} warning(s)` : ''}`
      : `${failing.length} of ${report.checks.length} check(s) failed: ${failing.map((c) => c.name).join(', ')}`,
  );
  return `${lines.join('\n')}\n`;
}

export function doctorJson(report: DoctorReport): string {
  return `${JSON.stringify({ target: report.target, ok: failed(report).length === 0, checks: report.checks })}\n`;
}
