import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { DfeError, describeError } from '../errors.js';
import type { ClickHouseHandle } from './client.js';
import type { SessionPool } from './sessions.js';
import { markWithoutHttp } from './traced-query.js';

/**
 * The embedded backend: the npm package chdb, a real ClickHouse engine inside
 * the Node process, plugged into `@clickhouse/client` through its `connection`
 * option. A devDependency: the production image never ships it. Everything
 * that differs from a server lives in this file, behind `ClickHouseHandle`,
 * each piece with the quirk it works around (docs/embedded.md lists them):
 *
 *  1. one data directory per process            → openEmbedded (one engine per path)
 *  2. one connection runs one query at a time   → embeddedSessionPool (a session per concurrent run)
 *  3. per-query settings outlive the query      → embeddedSessionPool (SET k = DEFAULT after a run)
 *  4. queries share libuv's thread pool         → the statement gate
 *  5. parameter-bound queries run one at a time → the claim gate
 *  6. a failed query's output leaks into the next result → drainAfterError
 *  8. the engine's configuration is fixed by the first connection to a directory
 *     → anchorEngine (DFE_EMBEDDED_CONFIG_FILE)
 *
 * Quirks handled outside this file, without asking which backend it is (they
 * are harmless on a server): per-query `max_execution_time` is what stops an
 * aborted query (src/shim/clickhouse-query.ts); coordination writes set
 * `log_comment` and the dedup token to empty (src/coordination/coordinator.ts).
 */

/**
 * The client's own logger writes to the console, outside pino and its redaction.
 * Every failure surfaces as a rejected promise that our callers log, so it is off.
 */
const CLIENT_LOG = { level: ClickHouseLogLevel.OFF };

/**
 * Quirk 1: libchdb allows one data directory per process. Each call opens its
 * own connection; connections to the same path share one in-process engine (a
 * second path is refused by chdb itself).
 */
export async function openEmbedded(path: string, configFile?: string): Promise<ClickHouseHandle> {
  let createChdbConnection: (options: { path?: string }) => unknown;
  try {
    ({ createChdbConnection } = (await import('chdb/connection')) as unknown as {
      createChdbConnection: (options: { path?: string }) => unknown;
    });
  } catch (err) {
    throw new DfeError(
      'EMBEDDED_UNAVAILABLE',
      `the embedded ClickHouse (npm package chdb) is not installed (${describeError(err)}); set DFE_CLICKHOUSE_URL to use a server`,
      { key: 'DFE_CLICKHOUSE_URL', cause: err },
    );
  }
  if (path !== ':memory:') mkdirSync(path, { recursive: true });
  await anchorEngine(path, configFile);
  let connection: unknown;
  try {
    connection = createChdbConnection({ path });
  } catch (err) {
    throw whyNotOpened(path, configFile, err);
  }
  const client = createClient({ connection: connection as never, log: CLIENT_LOG });
  // No HTTP request to carry a traceparent: the query span exists without one (traced-query.ts).
  markWithoutHttp(client);
  return {
    client,
    backend: 'embedded',
    target: `embedded:${path}`,
    statementSessions: (open = () => openEmbedded(path, configFile)) => embeddedSessionPool(open),
    afterQueryError: drainAfterError,
    close: () => client.close(),
  };
}

/**
 * Quirk 8: the engine of a data directory starts with the first connection to it
 * and takes its configuration (`--config-file`) from that connection only; chdb's
 * `createChdbConnection` passes none. So with a config file (DFE_EMBEDDED_CONFIG_FILE,
 * e.g. testkeeper + keeper_map_path_prefix: docs/embedded.md) a chdb Session opened
 * with `connectionArgs: ['--config-file=…']` comes first and stays open for the life
 * of the process; every later connection to the directory shares its engine.
 */
const anchors = new Map<string, string | undefined>();

async function anchorEngine(path: string, configFile: string | undefined): Promise<void> {
  const key = path === ':memory:' ? path : resolve(path);
  const file = configFile === undefined ? undefined : resolve(configFile);
  if (anchors.has(key)) {
    if (anchors.get(key) === file) return;
    throw new DfeError(
      'CONFIG_INVALID',
      `invalid DFE_EMBEDDED_CONFIG_FILE=${JSON.stringify(configFile ?? '')}: the embedded engine at ${path} is already open ` +
        `${anchors.get(key) === undefined ? 'without a config file' : `with ${anchors.get(key)}`} in this process`,
      { key: 'DFE_EMBEDDED_CONFIG_FILE', value: configFile ?? '' },
    );
  }
  if (file !== undefined) {
    if (path === ':memory:') {
      throw new DfeError('CONFIG_INVALID', 'DFE_EMBEDDED_CONFIG_FILE needs a data directory (DFE_EMBEDDED_PATH), not :memory:', {
        key: 'DFE_EMBEDDED_CONFIG_FILE',
        value: configFile ?? '',
      });
    }
    if (!existsSync(file)) {
      throw new DfeError('CONFIG_INVALID', `invalid DFE_EMBEDDED_CONFIG_FILE=${JSON.stringify(configFile)}: no such file`, {
        key: 'DFE_EMBEDDED_CONFIG_FILE',
        value: configFile ?? '',
      });
    }
    const { Session } = (await import('chdb')) as unknown as { Session: new (path: string, opts: { connectionArgs: string[] }) => unknown };
    try {
      new Session(key, { connectionArgs: [`--config-file=${file}`] });
    } catch (err) {
      throw new DfeError('CONFIG_INVALID', `invalid DFE_EMBEDDED_CONFIG_FILE=${JSON.stringify(configFile)}: the engine refused it (${describeError(err)})`, {
        key: 'DFE_EMBEDDED_CONFIG_FILE',
        value: configFile ?? '',
        cause: err,
      });
    }
  }
  anchors.set(key, file);
}

/**
 * The engine refused a data directory. The one cause an operator meets by following the
 * README: `npm start` (the demo) writes its Keeper claim tables (KeeperMap) into the default
 * directory, and a program started later on that directory without the demo's config file
 * cannot attach them; chdb then says only that it could not connect. Named here, with the
 * setting that fixes it; any other refusal keeps the engine's own words.
 */
function whyNotOpened(path: string, configFile: string | undefined, err: unknown): Error {
  const keeperTables = configFile === undefined && path !== ':memory:' ? keeperMapTables(path) : [];
  if (keeperTables.length === 0) return err instanceof Error ? err : new Error(describeError(err));
  return new DfeError(
    'CONFIG_INVALID',
    `the embedded data directory DFE_EMBEDDED_PATH=${JSON.stringify(path)} holds KeeperMap tables (${keeperTables.join(', ')}), ` +
      'which only an engine with Keeper can attach, and DFE_EMBEDDED_CONFIG_FILE is not set: set it to a config with Keeper ' +
      '(examples/embedded-keeper.xml, as `npm start` does) or point DFE_EMBEDDED_PATH at another directory (docs/embedded.md)',
    { key: 'DFE_EMBEDDED_CONFIG_FILE', value: '', cause: err },
  );
}

/** `database.table` of every KeeperMap table in a data directory's metadata (read only when opening failed). */
function keeperMapTables(path: string): string[] {
  const metadata = join(path, 'metadata');
  const found: string[] = [];
  const entries = (dir: string): string[] => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  };
  for (const database of entries(metadata)) {
    const dir = join(metadata, database);
    // An Atomic database's directory is a symbolic link into store/: statSync follows it.
    if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) continue;
    for (const file of entries(dir)) {
      if (!file.endsWith('.sql')) continue;
      let sql: string;
      try {
        sql = readFileSync(join(dir, file), 'utf8');
      } catch {
        continue;
      }
      if (/\bENGINE\s*=\s*KeeperMap\b/.test(sql)) found.push(`${database}.${file.slice(0, -'.sql'.length)}`);
    }
  }
  return found.sort();
}

/**
 * Quirks 2 and 3. One connection is one engine session and runs ONE query at a
 * time, so statements sharing the coordination connection would queue lease
 * renewals behind a long hunt (and lose the lease): each concurrent run gets
 * its own session, opened on first use and kept. chdb applies per-query
 * settings with `SET`, which outlives the query in that session, so after a
 * run the hunt's settings are put back to DEFAULT before the session is reused.
 * Quirks 4 and 5: statements and claims pass the process-wide gates below.
 */
export function embeddedSessionPool(
  open: () => Promise<ClickHouseHandle>,
  statements: Gate = embeddedStatementGate(),
  claims: Gate = embeddedClaimGate(),
): SessionPool {
  const idle: ClickHouseHandle[] = [];
  const all = new Map<ClickHouseClient, { handle: ClickHouseHandle; clean: boolean }>();
  // One round trip: chdb takes several statements in one query. Keys are
  // identifiers validated by the hunt spec (or the runner's own two).
  const resetKeys = async (client: ClickHouseClient, keys: readonly string[]) => {
    if (keys.length > 0) await client.command({ query: keys.map((key) => `SET ${key} = DEFAULT`).join('; ') });
  };
  return {
    async acquire() {
      let handle = idle.pop();
      if (!handle) {
        handle = await open();
      }
      all.set(handle.client, { handle, clean: false });
      return { client: handle.client };
    },
    runStatements: (fn) => statements.run(fn),
    claimStart: (fn) => claims.run(fn),
    async reset(session, settingKeys) {
      await resetKeys(session.client, settingKeys);
      const entry = all.get(session.client);
      if (entry) entry.clean = true;
    },
    async release(session, settingKeys) {
      const entry = all.get(session.client);
      if (!entry) return;
      try {
        if (!entry.clean) await resetKeys(session.client, settingKeys);
        idle.push(entry.handle);
      } catch {
        // A session that cannot be reset is dropped, never reused with a hunt's settings.
        all.delete(session.client);
        await entry.handle.close().catch(() => undefined);
      }
    },
    async close() {
      idle.length = 0;
      const handles = [...all.values()].map((e) => e.handle);
      all.clear();
      await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
    },
  };
}

/**
 * Quirk 4: chdb runs every query on libuv's thread pool, which has
 * UV_THREADPOOL_SIZE threads (default 4) for the whole process and must be
 * sized in the environment before Node starts (`UV_THREADPOOL_SIZE=16 node …`;
 * setting it from JavaScript is too late). Hunt statements can be long; if
 * they took every thread, lease renewals would queue behind them and a live
 * run could lose its lease. So on the embedded backend hunt statements pass
 * through a process-wide gate, which always leaves two threads for
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
 * Quirk 5: chdb also runs parameter-bound queries one at a time process-wide.
 * A claim's free read and conditional insert are timed against `settle`, so on
 * the embedded backend claims start one at a time: a claim waits here, before
 * its free read, instead of in chdb's queue between its free read and its
 * insert, where the wait would make it late.
 */
export function embeddedClaimGate(): Gate {
  claimGate ??= new Gate(1);
  return claimGate;
}

/**
 * Quirk 6 (seen with chdb 3.4): the partial output of a query that FAILED (a
 * format's header, rows written before the error) is prepended to the next
 * result on the same connection. The shim reads JSONCompact, one JSON document,
 * so a prefixed answer fails to parse and is held, never misread; and after an
 * error one throwaway query drains the leftover so the next answer is clean.
 * After an abort the engine may still be computing; the drain would queue
 * behind it, so it is not awaited there.
 */
async function drainAfterError(client: ClickHouseClient, aborted: boolean): Promise<void> {
  if (aborted) void drainLeftover(client);
  else await drainLeftover(client);
}

async function drainLeftover(client: ClickHouseClient): Promise<void> {
  try {
    const rs = await client.query({ query: 'SELECT 1', format: 'JSONCompactEachRow' });
    await rs.text();
  } catch {
    // Nothing to do: a broken engine shows on the next real query.
  }
}
