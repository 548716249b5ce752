import { setTimeout as delay } from 'node:timers/promises';
import { openClickHouse, type ClickHouseHandle } from '../clickhouse/client.js';
import type { AppConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import type { ResolvedTopology } from '../coordination/tables.js';
import { startRunner, type RunnerHandle } from './start.js';
import type { RunnerEvents } from './fire.js';
import { injectFaults, type InjectedFault } from './nemesis/inject.js';
import { planFaults, type FaultKind } from './nemesis/plan.js';
import { startProcessRace, type ProcessRaceOptions } from './nemesis/process-race.js';

/**
 * The two ways `verify-coordination` races its runners (docs/operations.md#verify-coordination):
 * in this process, each on its own connections (`startInProcess`), or as separate
 * `dfe-hunt-runner run` processes with the nemesis' faults on them (`startProcesses`).
 */
/** A race of runners, started; `stop` ends it (bounded) and the nemesis' faults are its own. */
export interface Race {
  /** When the runners were all started (and, as processes, ready): the run's time 0. */
  readonly startedMs: number;
  readonly faults: Promise<readonly InjectedFault[]>;
  unexpectedExits(): readonly string[];
  stop(): Promise<void>;
}

export interface ProcessesOptions extends ProcessRaceOptions {
  readonly seconds: number;
  readonly kinds: readonly FaultKind[];
  readonly seed: number;
}

/** The runners as processes, and the nemesis' faults on them from `startedMs` on. */
export async function startProcesses(o: ProcessesOptions): Promise<Race> {
  const race = await startProcessRace(o);
  if (o.kinds.length > 0) o.progress(`nemesis: ${o.kinds.join(',')}, seed ${o.seed} (--seed ${o.seed} repeats this plan)`);
  const startedMs = Date.now();
  const plan = planFaults({ seed: o.seed, kinds: o.kinds, runMs: o.seconds * 1000, leaseSeconds: o.config.runner.leaseSeconds });
  // On the embedded engine a stall also holds the engine itself with a long, bounded query.
  const holdEngine =
    o.config.clickhouse.backend === 'embedded'
      ? async (ms: number) => {
          const seconds = Math.max(1, Math.round(ms / 1000));
          await o.handle.client.query({
            query: 'SELECT count() FROM numbers_mt(1000000000000) WHERE NOT ignore(cityHash64(number))',
            format: 'JSONEachRow',
            clickhouse_settings: { max_execution_time: seconds, timeout_overflow_mode: 'break' },
          }).then((rs) => rs.json());
        }
      : undefined;
  const abort = new AbortController();
  const faults = o.kinds.length > 0 ? injectFaults({ plan, race, startedMs, progress: o.progress, signal: abort.signal, ...(holdEngine ? { holdEngine } : {}) }) : Promise.resolve([]);
  let stopped: Promise<void> | undefined;
  return {
    startedMs,
    faults,
    unexpectedExits: () => race.unexpectedExits(),
    // A stop before the plan's end (an error) cuts the faults short: SIGCONT, no restart.
    stop: () => {
      abort.abort();
      return (stopped ??= faults.catch(() => undefined).then(() => race.stop(10_000)));
    },
  };
}

export interface InProcessOptions {
  readonly config: AppConfig;
  readonly topology: ResolvedTopology;
  readonly log: Logger;
  readonly progress: (line: string) => void;
  readonly runners: number;
  readonly kill?: { readonly atSeconds: number; readonly restartAfterSeconds: number };
}

/** N runners in this process, each on its own connections; with `kill`, runner 0 crashed and replaced. */
export async function startInProcess(o: InProcessOptions): Promise<Race> {
  const { config, log, progress } = o;
  const handles: ClickHouseHandle[] = [];
  const runners: RunnerHandle[] = [];
  // The kill lands in the victim's statement hook, before a statement is sent and while none
  // of its runs has sent one: a runner killed with an output INSERT in flight (or written but
  // not yet watermarked) would run that window again — the one case docs/claim-protocol.md
  // leaves to the dedup token, which a plain MergeTree output table does not have. So the
  // victim runs one fire at a time (cap 1): its claims still race, and its next statement
  // hook after the arming finds none of its INSERTs in flight.
  const writing = new Set<string>();
  let armed: (() => void) | undefined;
  const victimEvents: RunnerEvents = {
    statement: (e) => {
      if (armed && writing.size === 0) armed();
      else writing.add(`${e.huntId}@${e.fire}`);
    },
    run: (e) => writing.delete(`${e.huntId}@${e.fire}`),
  };
  const start = async (id: string, events?: RunnerEvents): Promise<RunnerHandle> => {
    const own = await openClickHouse(config.clickhouse);
    handles.push(own);
    const ownConfig = events ? { ...config, runner: { ...config.runner, cap: 1 } } : config;
    return startRunner({ handle: own, config: ownConfig, log, runnerId: id, topology: o.topology, ...(events ? { events } : {}) });
  };
  const close = async () => {
    for (const r of runners) await r.stop().catch(() => undefined);
    for (const h of handles) await h.close().catch(() => undefined);
  };
  try {
    for (let i = 0; i < o.runners; i += 1) runners.push(await start(`verify-${i}`, i === 0 && o.kill ? victimEvents : undefined));
  } catch (err) {
    await close();
    throw err;
  }
  const kill = o.kill;
  const startedMs = Date.now();
  const faults = (async (): Promise<InjectedFault[]> => {
    if (!kill || o.runners === 0) return [];
    await delay(Math.max(0, startedMs + kill.atSeconds * 1000 - Date.now()));
    const victim = runners[0];
    // Armed now; fired by the victim's next statement hook, or after 10 s regardless.
    const killed = new Promise<void>((resolve) => {
      armed = () => {
        armed = undefined;
        victim?.crash();
        resolve();
      };
    });
    await Promise.race([killed, delay(10_000).then(() => armed?.())]);
    // Its connections stay open, as a dead pod's sockets linger: closing an embedded
    // connection under queries still queued on it would stall chdb's parameter queue.
    progress(`killed ${victim?.runnerId ?? 'runner 0'} ${((Date.now() - startedMs) / 1000).toFixed(1)} s in`);
    await delay(kill.restartAfterSeconds * 1000);
    runners[0] = await start('verify-0-restarted');
    progress('restarted it as verify-0-restarted');
    return [];
  })();
  let stopped: Promise<void> | undefined;
  return {
    startedMs,
    faults,
    unexpectedExits: () => [],
    stop: () => (stopped ??= faults.catch(() => undefined).then(async () => {
      await Promise.all(runners.map((r) => r.stop()));
      await close();
    })),
  };
}
