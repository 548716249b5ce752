import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { openClickHouse, type ClickHouseClient, type ClickHouseHandle, type SessionPool } from '../../src/clickhouse/client.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import { startShim, type RunningShim } from '../../src/cli/shim.js';
import { freePort } from '../helpers/ports.js';

/**
 * The real shim (startShim: catalogue files, config, Fastify listening on a
 * loopback port) driven over real sockets, with the ClickHouse it talks to
 * switchable between a real server and fault injectors — as if ClickHouse
 * went away and came back, without restarting the shim (its cache must live).
 */

/** A ClickHouse handle whose target a test changes; each target gets a production-configured client. */
export class SwitchableClickHouse implements ClickHouseHandle {
  private readonly handles = new Map<string, ClickHouseHandle>();
  private currentHandle: ClickHouseHandle | undefined;

  /** Starts on `initial`: a server URL, or an already open handle (the embedded engine). */
  static async open(initial: string | ClickHouseHandle): Promise<SwitchableClickHouse> {
    const switchable = new SwitchableClickHouse();
    await switchable.use(initial);
    return switchable;
  }

  get client(): ClickHouseClient {
    if (!this.currentHandle) throw new Error('no ClickHouse target selected');
    return this.currentHandle.client;
  }
  get backend(): 'server' | 'embedded' {
    return this.currentHandle?.backend ?? 'server';
  }
  get target(): string {
    return this.currentHandle?.target ?? 'none';
  }
  statementSessions(open?: () => Promise<ClickHouseHandle>): SessionPool {
    if (!this.currentHandle) throw new Error('no ClickHouse target selected');
    return this.currentHandle.statementSessions(open);
  }
  /** The current target's, read (like `client`) when a query starts. */
  get afterQueryError(): ClickHouseHandle['afterQueryError'] {
    return this.currentHandle?.afterQueryError ?? (async () => undefined);
  }

  async use(target: string | ClickHouseHandle): Promise<void> {
    if (typeof target !== 'string') {
      // Not owned: the caller closes it.
      this.currentHandle = target;
      return;
    }
    let handle = this.handles.get(target);
    if (!handle) {
      handle = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: target }).clickhouse);
      this.handles.set(target, handle);
    }
    this.currentHandle = handle;
  }

  async close(): Promise<void> {
    for (const handle of this.handles.values()) await handle.close();
    this.handles.clear();
  }
}

export interface ChaosShim {
  readonly shim: RunningShim;
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the real shim with `overrideYaml` merged over the built-in catalogue. */
export async function startChaosShim(overrideYaml: string, clickhouse: ClickHouseHandle | { url: string }): Promise<ChaosShim> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-chaos-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, overrideYaml);
  const env: Record<string, string> = {
    DFE_KEDA_SHIM_HOST: '127.0.0.1',
    DFE_KEDA_SHIM_PORT: String(await freePort()),
    DFE_KEDA_SHIM_QUERY_CONFIG: overridePath,
    LOG_LEVEL: 'silent',
    ...('url' in clickhouse ? { DFE_CLICKHOUSE_URL: clickhouse.url } : { DFE_CLICKHOUSE_BACKEND: 'server', DFE_CLICKHOUSE_URL: 'http://127.0.0.1:1' }),
  };
  const shim = await startShim({
    config: loadConfig(env),
    logger: silentLogger(),
    ...('url' in clickhouse ? {} : { clickhouse }),
  });
  return {
    shim,
    url: shim.url,
    async close() {
      await shim.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Answer {
  readonly status: number;
  readonly body: { value?: number; source?: string; age_seconds?: number; error?: string };
  /** Milliseconds since the poll loop started. */
  readonly atMs: number;
}

/** One keep-alive HTTP client per test file, like KEDA's. */
export const agent = new Agent({ keepAliveTimeout: 4_000, connections: 16 });

export async function getJson(url: string): Promise<{ status: number; body: Answer['body'] }> {
  const res = await request(url, { dispatcher: agent, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const text = await res.body.text();
  let body: Answer['body'];
  try {
    body = JSON.parse(text) as Answer['body'];
  } catch {
    body = { error: `not JSON: ${text.slice(0, 80)}` };
  }
  return { status: res.statusCode, body };
}

export interface PollOptions {
  /** Parallel request loops (KEDA polls one trigger at a time; several ScaledObjects poll in parallel). */
  readonly concurrency: number;
  /** Stop after this long… */
  readonly durationMs: number;
  /** …or this many requests, whichever comes first (bounded either way). */
  readonly maxRequests?: number;
  /** Stop early once an answer satisfies this. */
  readonly until?: (answer: Answer) => boolean;
}

/** A bounded steady load of GETs on `url`; every answer, in order of arrival. */
export async function poll(url: string, options: PollOptions): Promise<Answer[]> {
  const answers: Answer[] = [];
  const started = Date.now();
  const maxRequests = options.maxRequests ?? 100_000;
  let issued = 0;
  let done = false;
  const loop = async () => {
    while (!done && Date.now() - started < options.durationMs && issued < maxRequests) {
      issued += 1;
      const { status, body } = await getJson(url);
      const answer = { status, body, atMs: Date.now() - started };
      answers.push(answer);
      if (options.until?.(answer)) done = true;
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, loop));
  return answers;
}

/** Open file descriptors of this process (Linux), or undefined where /proc is not there. */
export function openFdCount(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return undefined;
  }
}

export interface LoadTally {
  total: number;
  non200: number;
  /** Answers whose value was not a number or above `ceiling`. */
  aboveCeiling: number;
  bySource: Record<string, number>;
  firstProblem: string | undefined;
}

/**
 * Like `poll`, but keeps counts instead of every answer (a soak sends too many
 * to keep), paced by `pauseMs` between a loop's requests, until `stop()` says so.
 */
export async function pollTally(
  urls: readonly string[],
  options: { concurrency: number; pauseMs: number; ceiling: number; stop: () => boolean },
): Promise<LoadTally> {
  const tally: LoadTally = { total: 0, non200: 0, aboveCeiling: 0, bySource: {}, firstProblem: undefined };
  const loop = async (index: number) => {
    let i = index;
    while (!options.stop()) {
      const url = urls[i++ % urls.length] as string;
      const { status, body } = await getJson(url);
      tally.total += 1;
      const source = body.source ?? 'none';
      tally.bySource[source] = (tally.bySource[source] ?? 0) + 1;
      if (status !== 200) tally.non200 += 1;
      if (typeof body.value !== 'number' || body.value > options.ceiling) tally.aboveCeiling += 1;
      if ((status !== 200 || typeof body.value !== 'number' || body.value > options.ceiling) && tally.firstProblem === undefined) {
        tally.firstProblem = `${url} → ${status} ${JSON.stringify(body)}`;
      }
      await new Promise((r) => setTimeout(r, options.pauseMs));
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, i) => loop(i)));
  return tally;
}
