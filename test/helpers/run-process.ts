import { spawn } from 'node:child_process';

/** What a finished child process left behind. */
export interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node <args>` to completion and collects its output; a child still
 * running after `killAfterMs` is killed (SIGKILL) so a hung CLI fails its test
 * instead of the whole run.
 */
export function runNode(args: readonly string[], env: NodeJS.ProcessEnv, killAfterMs = 60_000): Promise<ProcessResult> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}
