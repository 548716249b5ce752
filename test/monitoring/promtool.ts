/**
 * promtool (Prometheus' rule and exposition checker), built into .tools/bin by
 * .ci/install-promtool.sh and found like the chart tools (test/helpers/tools.ts).
 */
import { spawnSync } from 'node:child_process';
import { REPO, missing, tools } from '../helpers/tools.js';

export const promtool: string | undefined = tools.promtool;

/** Why promtool tests cannot run here, with the install hint, or undefined when they can. */
export function promtoolMissing(): string | undefined {
  return missing('promtool');
}

export interface PromtoolRun {
  readonly status: number | null;
  readonly output: string;
}

export function runPromtool(args: readonly string[], input?: string, cwd = REPO): PromtoolRun {
  const result = spawnSync(promtool!, args, { cwd, input, encoding: 'utf8' });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}
