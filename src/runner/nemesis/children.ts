import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

/**
 * Every process the nemesis starts (runners, CPU hogs), in one process-wide set, so none
 * outlives the command: on a normal end each is stopped, and `reapChildren` (called on exit,
 * on an error and on SIGINT/SIGTERM) sends each live one SIGCONT, then SIGKILL. SIGCONT
 * first: a SIGSTOPped process does not act on SIGTERM until continued, and one left stopped
 * would hold its sockets and memory for ever.
 */
const live = new Set<ChildProcess>();
let exitHook = false;

export function spawnChild(command: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => reapChildren());
  }
  const child = spawn(command, [...args], options);
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.once('error', () => live.delete(child));
  return child;
}

/** Synchronous: SIGCONT then SIGKILL to each live child. Returns how many there were. */
export function reapChildren(): number {
  const n = live.size;
  for (const child of live) {
    signal(child, 'SIGCONT');
    signal(child, 'SIGKILL');
  }
  live.clear();
  return n;
}

/** Live children, for tests and the report. */
export function liveChildren(): number {
  return live.size;
}

export function signal(child: ChildProcess, name: NodeJS.Signals): boolean {
  if (child.exitCode !== null || child.signalCode !== null) return false;
  try {
    return child.kill(name);
  } catch {
    return false;
  }
}

/** Resolves when the child has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
}

/** SIGCONT, SIGTERM, then SIGKILL after `graceMs` if it is still there. Bounded: resolves when it exited. */
export async function stopChild(child: ChildProcess, graceMs: number): Promise<'stopped' | 'killed'> {
  signal(child, 'SIGCONT');
  signal(child, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const killed = new Promise<'killed'>((resolve) => {
    timer = setTimeout(() => {
      signal(child, 'SIGKILL');
      resolve('killed');
    }, graceMs);
  });
  const outcome = await Promise.race([exited(child).then(() => 'stopped' as const), killed]);
  clearTimeout(timer);
  await exited(child);
  return outcome;
}
