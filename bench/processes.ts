import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { freePort } from '../test/helpers/ports.js';

/**
 * A server program as its own OS process, as a pod runs it: how long from
 * exec until `/readyz` answers 200, and what it holds in memory (RSS from
 * /proc, so Linux only).
 */
export interface ServerProcess {
  readonly url: string;
  readonly pid: number;
  /** From spawn() to the first 200 of /readyz, ms. */
  readonly readyMs: number;
  rssBytes(): number;
  /** User + system CPU the process has used so far, ms. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** The bare-Fastify baseline program (bench/bare-server.ts, built next to this file). */
export const BARE_SERVER = new URL('./bare-server.js', import.meta.url).pathname;

function getStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false, timeout: 1_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

export function rssOf(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match?.[1]) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

export function cpuMsOf(pid: number): number {
  // Fields after the parenthesised command: utime and stime are the 12th and 13th, in clock ticks (100/s on Linux).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Spawns `node <script> <args…>` (`{port}` in args is replaced by a free
 * port) and waits for /readyz 200, polling every 5 ms.
 */
export async function spawnServer(
  script: string,
  args: readonly string[],
  env: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<ServerProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // Only PATH and HOME from the bench's environment: no DFE_* setting leaks in.
  const childEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env };
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, [script, ...args.map((a) => a.replace('{port}', String(port)))], {
    env: childEnv,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-2_000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let exitedEarly = false;
  void exited.then(() => (exitedEarly = true));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  };
  for (;;) {
    if (exitedEarly) throw new Error(`${script} exited before /readyz: ${stderr.trim() || `code ${child.exitCode}`}`);
    if ((await getStatus(`${url}/readyz`)) === 200) break;
    if (performance.now() - started > timeoutMs) {
      await stop();
      throw new Error(`${script}: no /readyz 200 within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const readyMs = performance.now() - started;
  const pid = child.pid ?? 0;
  return { url, pid, readyMs, rssBytes: () => rssOf(pid), cpuMs: () => cpuMsOf(pid), stop };
}
