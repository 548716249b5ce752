import type { ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseHandle } from '../clickhouse/client.js';
import { embeddedClaimGate, embeddedStatementGate, type Gate } from './embedded-gate.js';

/**
 * Where hunt statements run. Sharp edges of the embedded backend (chdb), which
 * this pool exists for:
 *  - one connection is one engine session and runs ONE query at a time, so
 *    statements sharing the coordination connection would queue lease renewals
 *    behind a long hunt (and lose the lease); each concurrent run gets its own;
 *  - chdb applies per-query settings with `SET`, which outlives the query in
 *    that session, so after a run the hunt's settings are put back to DEFAULT.
 *  - every chdb query takes a libuv pool thread, so statements go through a
 *    process-wide gate that keeps threads free for coordination.
 * On the server backend every HTTP request carries its own settings and the
 * client pools sockets, so all runs share the one client.
 */
export interface StatementSession {
  readonly client: ClickHouseClient;
}

export interface SessionPool {
  acquire(): Promise<StatementSession>;
  /** Runs a fire's statements; on the embedded backend through the process-wide gate (embedded-gate.ts). */
  runStatements<T>(fn: () => Promise<T>): Promise<T>;
  /** Runs a claim's free read and conditional insert; one at a time on the embedded backend. */
  claimStart<T>(fn: () => Promise<T>): Promise<T>;
  /** Puts `settingKeys` back to DEFAULT where settings outlive a query; throws if it cannot. */
  reset(session: StatementSession, settingKeys: readonly string[]): Promise<void>;
  /** Returns the session, resetting `settingKeys` first unless `reset` already did. */
  release(session: StatementSession, settingKeys: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export function sharedSessionPool(client: ClickHouseClient): SessionPool {
  const session = { client };
  return {
    acquire: async () => session,
    runStatements: (fn) => fn(),
    claimStart: (fn) => fn(),
    reset: async () => undefined,
    release: async () => undefined,
    close: async () => undefined,
  };
}

/** One embedded session per concurrent run, opened on first use and kept. */
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
