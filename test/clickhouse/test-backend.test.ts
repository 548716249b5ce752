/**
 * The test-backend choice of test/helpers/clickhouse.ts: a ClickHouse container only where a
 * Docker engine answers; otherwise one line, and the run stays as configured. There is no
 * Docker engine on the machines this project is built on, so the container itself is not
 * started here; the refusal path runs the real testcontainers client against a refused port.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { startClickHouseContainer } from '../helpers/clickhouse.js';

afterEach(() => vi.restoreAllMocks());

describe('startClickHouseContainer', () => {
  it('a server given in DFE_CLICKHOUSE_URL wins: no container, one line saying so', async () => {
    const lines = vi.spyOn(console, 'info').mockImplementation(() => undefined);
    const env = { DFE_CLICKHOUSE_URL: 'http://127.0.0.1:8123', DOCKER_HOST: 'tcp://127.0.0.1:1' };
    const backend = await startClickHouseContainer(env);
    expect(backend).toEqual({ kind: 'as-configured', reason: 'DFE_CLICKHOUSE_URL is set: ClickHouse tests use the server in DFE_CLICKHOUSE_URL' });
    expect(env.DFE_CLICKHOUSE_URL).toBe('http://127.0.0.1:8123');
    expect(lines.mock.calls).toEqual([[`[clickhouse] ${backend.kind === 'as-configured' ? backend.reason : ''}`]]);
  });

  it('opted out with DFE_TEST_TESTCONTAINERS=0', async () => {
    vi.spyOn(console, 'info').mockImplementation(() => undefined);
    const backend = await startClickHouseContainer({ DFE_TEST_TESTCONTAINERS: '0', DOCKER_HOST: 'tcp://127.0.0.1:1' });
    expect(backend).toMatchObject({ kind: 'as-configured', reason: expect.stringContaining('the embedded engine') });
  });

  it('a Docker host that does not answer: the real testcontainers client fails, the run falls back, nothing set', async () => {
    const lines = vi.spyOn(console, 'info').mockImplementation(() => undefined);
    const env: NodeJS.ProcessEnv = { DOCKER_HOST: `tcp://127.0.0.1:${await freePort()}` };
    const backend = await startClickHouseContainer(env);
    expect(backend.kind).toBe('as-configured');
    expect(backend.kind === 'as-configured' && backend.reason).toMatch(/^no Docker engine answers \(.+\): ClickHouse tests use the embedded engine \(chdb\)$/);
    expect(env.DFE_CLICKHOUSE_URL).toBeUndefined();
    expect(lines).toHaveBeenCalledTimes(1);
  });
});
