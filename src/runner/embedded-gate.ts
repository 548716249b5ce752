/**
 * Sharp edge of the embedded backend: chdb runs every query on libuv's thread
 * pool, which has UV_THREADPOOL_SIZE threads (default 4) for the whole process
 * and must be sized in the environment before Node starts (`UV_THREADPOOL_SIZE=16
 * node …`; setting it from JavaScript is too late). Hunt statements can be long;
 * if they took every thread, lease renewals would queue behind them and a live
 * run could lose its lease. So on the embedded backend hunt statements pass
 * through this process-wide gate, which always leaves two threads for
 * coordination (claims, renewals, ticks). The server backend needs no gate.
 */
export const DEFAULT_UV_THREADPOOL_SIZE = 4;
const RESERVED_FOR_COORDINATION = 2;

export function statementSlots(env: NodeJS.ProcessEnv = process.env): number {
  const pool = Number.parseInt(env.UV_THREADPOOL_SIZE ?? '', 10);
  const threads = Number.isFinite(pool) && pool > 0 ? Math.min(pool, 1024) : DEFAULT_UV_THREADPOOL_SIZE;
  return Math.max(1, threads - RESERVED_FOR_COORDINATION);
}

/** A counting semaphore, FIFO. */
export class Gate {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly slots: number) {
    this.free = slots;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}

let statementGate: Gate | undefined;
let claimGate: Gate | undefined;

/** The one statement gate of this process (several runners in one process share its threads). */
export function embeddedStatementGate(): Gate {
  statementGate ??= new Gate(statementSlots());
  return statementGate;
}

/**
 * chdb also runs parameter-bound queries one at a time process-wide. A claim's
 * free read and conditional insert are timed against `settle`, so on the
 * embedded backend claims start one at a time: a claim waits here, before its
 * free read, instead of in chdb's queue between its free read and its insert,
 * where the wait would make it late.
 */
export function embeddedClaimGate(): Gate {
  claimGate ??= new Gate(1);
  return claimGate;
}
