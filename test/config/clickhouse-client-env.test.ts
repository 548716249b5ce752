import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';

/** The server client's idle keep-alive socket TTL (README settings; src/clickhouse/client.ts). */
describe('DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS', () => {
  const server = { DFE_CLICKHOUSE_URL: 'http://127.0.0.1:8123' };

  it('defaults to 2500 ms, under the 3 s keep_alive_timeout of older servers', () => {
    expect(loadConfig(server).clickhouse.idleSocketTtlMs).toBe(2_500);
    expect(loadConfig({}).clickhouse.idleSocketTtlMs).toBe(2_500);
  });

  it('takes whole milliseconds; 0 (keep-alive off) is allowed', () => {
    expect(loadConfig({ ...server, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: '55000' }).clickhouse.idleSocketTtlMs).toBe(55_000);
    expect(loadConfig({ ...server, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: ' 0 ' }).clickhouse.idleSocketTtlMs).toBe(0);
    // An empty variable is unset (Helm renders absent values as "").
    expect(loadConfig({ ...server, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: '' }).clickhouse.idleSocketTtlMs).toBe(2_500);
  });

  it('the loaded config is frozen', () => {
    const config = loadConfig({ ...server, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: '1000' });
    expect(Object.isFrozen(config.clickhouse)).toBe(true);
    expect(() => {
      (config.clickhouse as { idleSocketTtlMs: number }).idleSocketTtlMs = 1;
    }).toThrow(TypeError);
  });

  it('a bad value is an error naming the variable and the value', () => {
    for (const bad of ['-1', 'abc', '2.5', '1e3', '5s']) {
      expect(() => loadConfig({ ...server, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: bad })).toThrow(
        `invalid DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS=${JSON.stringify(bad)}: must be a whole number ≥ 0`,
      );
    }
    expect(() => loadConfig({ ...server, DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: '2147483648' })).toThrow(
      'invalid DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS="2147483648": must be at most 2147483647',
    );
  });
});

/** The server-refreshed backlog's period (docs/tables.md#the-server-refreshed-count): one setting for shim and runner. */
describe('DFE_BACKLOG_REFRESH_SECONDS', () => {
  it('defaults to 0 (off); whole seconds up to an hour', () => {
    expect(loadConfig({}).clickhouse.backlogRefreshSeconds).toBe(0);
    expect(loadConfig({ DFE_BACKLOG_REFRESH_SECONDS: ' 10 ' }).clickhouse.backlogRefreshSeconds).toBe(10);
    expect(loadConfig({ DFE_BACKLOG_REFRESH_SECONDS: '3600' }).clickhouse.backlogRefreshSeconds).toBe(3_600);
  });

  it('a bad value is an error naming the variable and the value', () => {
    for (const bad of ['-1', 'abc', '2.5', '10s']) {
      expect(() => loadConfig({ DFE_BACKLOG_REFRESH_SECONDS: bad })).toThrow(
        `invalid DFE_BACKLOG_REFRESH_SECONDS=${JSON.stringify(bad)}: must be a whole number ≥ 0`,
      );
    }
    expect(() => loadConfig({ DFE_BACKLOG_REFRESH_SECONDS: '3601' })).toThrow('invalid DFE_BACKLOG_REFRESH_SECONDS="3601": must be at most 3600');
  });
});
