/**
 * promtool (Prometheus' rule and exposition checker), built into .tools/bin by
 * .ci/install-promtool.sh. Tests that need it skip with a line saying how to install it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { REPO } from '../chart/tools.js';

export const promtool: string | undefined = [join(REPO, '.tools', 'bin', 'promtool'), ...(process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'promtool'))].find(
  (path) => path && existsSync(path),
);

/** Why promtool tests cannot run here (printed once), or undefined when they can. */
export function promtoolMissing(suite: string): string | undefined {
  if (promtool) return undefined;
  const reason = 'promtool not found: run `bash .ci/install-promtool.sh` (go install from the Go module proxy into .tools/bin)';
  console.warn(`[${suite}] skipped — ${reason}`);
  return reason;
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
