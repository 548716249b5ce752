import type { ClickHouseClient } from '@clickhouse/client';

/**
 * Where hunt statements run, as the runner sees it: a session to run a fire's
 * statements and end-of-run writes on, a gate around the statements, a gate
 * around a claim's timed part, and settings put back after a run. Each backend
 * implements it (`ClickHouseHandle.statementSessions()`): on a server every
 * HTTP request carries its own settings and the client pools sockets, so all
 * runs share the one client and every step is a no-op (`sharedSessionPool`
 * below); the embedded engine's pool and the quirks it works around are in
 * embedded.ts (docs/embedded.md).
 */
export interface StatementSession {
  readonly client: ClickHouseClient;
}

export interface SessionPool {
  acquire(): Promise<StatementSession>;
  /** Runs a fire's statements; on the embedded backend through the process-wide gate (embedded.ts). */
  runStatements<T>(fn: () => Promise<T>): Promise<T>;
  /** Runs a claim's free read and conditional insert; one at a time on the embedded backend. */
  claimStart<T>(fn: () => Promise<T>): Promise<T>;
  /** Puts `settingKeys` back to DEFAULT where settings outlive a query; throws if it cannot. */
  reset(session: StatementSession, settingKeys: readonly string[]): Promise<void>;
  /** Returns the session, resetting `settingKeys` first unless `reset` already did. */
  release(session: StatementSession, settingKeys: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

/** The server's pool: every run shares the one client; nothing to gate, reset or close. */
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
