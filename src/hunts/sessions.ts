import type { ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseHandle } from '../clickhouse/client.js';

/**
 * Where hunt statements run. Sharp edges of the embedded backend (chdb), which
 * this pool exists for:
 *  - one connection is one engine session and runs ONE query at a time, so
 *    statements sharing the coordination connection would queue lease renewals
 *    behind a long hunt (and lose the lease); each concurrent run gets its own;
 *  - chdb applies per-query settings with `SET`, which outlives the query in
 *    that session, so after a run the hunt's settings are put back to DEFAULT.
 * On the server backend every HTTP request carries its own settings and the
 * client pools sockets, so all runs share the one client.
 */
export interface StatementSession {
  readonly client: ClickHouseClient;
}

export interface SessionPool {
  acquire(): Promise<StatementSession>;
  /** Returns the session; `settingKeys` were set by the run and are reset where they persist. */
  release(session: StatementSession, settingKeys: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export function sharedSessionPool(client: ClickHouseClient): SessionPool {
  const session = { client };
  return {
    acquire: async () => session,
    release: async () => undefined,
    close: async () => undefined,
  };
}

/** One embedded session per concurrent run, opened on first use and kept. */
export function embeddedSessionPool(open: () => Promise<ClickHouseHandle>): SessionPool {
  const idle: ClickHouseHandle[] = [];
  const all: ClickHouseHandle[] = [];
  const byClient = new Map<ClickHouseClient, ClickHouseHandle>();
  return {
    async acquire() {
      let handle = idle.pop();
      if (!handle) {
        handle = await open();
        all.push(handle);
        byClient.set(handle.client, handle);
      }
      return { client: handle.client };
    },
    async release(session, settingKeys) {
      const handle = byClient.get(session.client);
      if (!handle) return;
      try {
        for (const key of settingKeys) await session.client.command({ query: `SET ${key} = DEFAULT` });
        idle.push(handle);
      } catch {
        // A session that cannot be reset is dropped, never reused with a hunt's settings.
        all.splice(all.indexOf(handle), 1);
        byClient.delete(session.client);
        await handle.close().catch(() => undefined);
      }
    },
    async close() {
      idle.length = 0;
      await Promise.all(all.splice(0).map((h) => h.close().catch(() => undefined)));
    },
  };
}
