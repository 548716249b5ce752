import { availableParallelism } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { exited, signal, spawnChild } from './children.js';
import type { FaultKind, PlannedFault } from './plan.js';
import type { ProcessRace } from './process-race.js';

/**
 * Carries out a fault plan (plan.ts) on a process race, each fault logged with its time:
 * - `pause`: SIGSTOP one runner, SIGCONT it `durationMs` later (more than twice the lease);
 * - `cpu`: CPU hogs, two per core (at most 8), each a busy loop that ends itself after
 *   `durationMs` (and is SIGKILLed if it has not, and on any exit of this process);
 * - `stall`: the proxy holds all traffic for `durationMs`; `holdEngine`, when given (the
 *   embedded engine), also runs a long query on the engine for as long;
 * - `kill`: SIGKILL one runner mid-run, start a new process in its place `durationMs` later.
 * A pause or kill lands on a runner no other fault holds; with none free it is skipped, and
 * says so. Resolves when every fault has ended; `signal` ends them early.
 */
export interface InjectedFault {
  readonly atSeconds: number;
  readonly kind: FaultKind;
  /** The runner it hit (pause, kill). */
  readonly target?: string;
  readonly durationSeconds: number;
  readonly detail: string;
}

export interface InjectOptions {
  readonly plan: readonly PlannedFault[];
  readonly race: ProcessRace;
  readonly startedMs: number;
  readonly progress: (line: string) => void;
  readonly holdEngine?: (ms: number) => Promise<void>;
  /** Aborted: no further fault starts, and those under way end now (SIGCONT, restart, hogs killed). */
  readonly signal?: AbortSignal;
}

/** Waits `ms`, or less if `signal` aborts; never rejects. */
function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return delay(ms, undefined, signal ? { signal } : {}).catch(() => undefined);
}

export function hogCount(): number {
  return Math.min(8, 2 * availableParallelism());
}

export async function injectFaults(options: InjectOptions): Promise<InjectedFault[]> {
  const { race, startedMs, progress } = options;
  const injected: InjectedFault[] = [];
  const busy = new Set<number>();
  const endings: Array<Promise<void>> = [];
  const at = () => (Date.now() - startedMs) / 1000;
  const log = (fault: Omit<InjectedFault, 'atSeconds'>) => {
    const entry = { atSeconds: Number(at().toFixed(1)), ...fault };
    injected.push(entry);
    progress(`nemesis +${entry.atSeconds.toFixed(1)} s: ${fault.kind}${fault.target ? ` ${fault.target}` : ''} for ${fault.durationSeconds.toFixed(1)} s: ${fault.detail}`);
  };
  const freeRunner = (pick: number): number | undefined => {
    const free = race.runnerIds().map((_, i) => i).filter((i) => !busy.has(i));
    return free[Math.min(free.length - 1, Math.floor(pick * free.length))];
  };

  const stop = options.signal;
  for (const fault of options.plan) {
    await wait(Math.max(0, startedMs + fault.atMs - Date.now()), stop);
    if (stop?.aborted) break;
    const seconds = fault.durationMs / 1000;
    if (fault.kind === 'pause' || fault.kind === 'kill') {
      const index = freeRunner(fault.pick);
      if (index === undefined) {
        log({ kind: fault.kind, durationSeconds: 0, detail: 'skipped: every runner is under another fault' });
        continue;
      }
      busy.add(index);
      const target = race.runnerIds()[index] ?? `verify-${index}`;
      if (fault.kind === 'pause') {
        race.pause(index);
        log({ kind: 'pause', target, durationSeconds: seconds, detail: 'SIGSTOP, then SIGCONT' });
        endings.push(
          wait(fault.durationMs, stop).then(() => {
            race.resume(index);
            busy.delete(index);
            progress(`nemesis +${at().toFixed(1)} s: SIGCONT ${target}`);
          }),
        );
      } else {
        await race.kill(index);
        log({ kind: 'kill', target, durationSeconds: seconds, detail: 'SIGKILL mid-run, then a new process in its place' });
        endings.push(
          wait(fault.durationMs, stop).then(async () => {
            if (!stop?.aborted) await race.restart(index);
            busy.delete(index);
            progress(`nemesis +${at().toFixed(1)} s: restarted as ${race.runnerIds()[index] ?? '?'}`);
          }),
        );
      }
    } else if (fault.kind === 'cpu') {
      const n = hogCount();
      const loop = `const end = Date.now() + ${fault.durationMs}; while (Date.now() < end) {}`;
      const hogs = Array.from({ length: n }, () => spawnChild(process.execPath, ['-e', loop], { stdio: 'ignore' }));
      log({ kind: 'cpu', durationSeconds: seconds, detail: `${n} busy-loop processes (${availableParallelism()} core(s))` });
      endings.push(
        (async () => {
          const bound = wait(fault.durationMs + 2000, stop).then(() => hogs.forEach((h) => signal(h, 'SIGKILL')));
          await Promise.race([Promise.all(hogs.map(exited)), bound]);
          await Promise.all(hogs.map(exited));
        })(),
      );
    } else if (race.canStall) {
      race.stall(fault.durationMs);
      const held = options.holdEngine?.(fault.durationMs).catch(() => undefined);
      log({ kind: 'stall', durationSeconds: seconds, detail: `ClickHouse stalled: the proxy holds every byte${held ? ', and a long query holds the embedded engine' : ''}` });
      endings.push(wait(fault.durationMs, stop).then(() => held));
    } else {
      log({ kind: 'stall', durationSeconds: 0, detail: 'skipped: no stall proxy before an https server' });
    }
  }
  await Promise.all(endings);
  return injected;
}
