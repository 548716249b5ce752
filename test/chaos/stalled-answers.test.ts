import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { serverHandle } from '../../src/clickhouse/client.js';
import { MAX_RESULT_BYTES } from '../../src/shim/clickhouse-query.js';
import { fly } from '../../src/shim/flight.js';
import { floodServer, stallServer, type SocketFaultEndpoint } from '../helpers/faults.js';
import { compiled, get, makeApp } from '../helpers/shim.js';

/**
 * Issue 9 items 3 and 7 on REAL sockets: a response that stalls after its
 * headers (half a body then silence, or a byte every 100 ms) is abandoned —
 * its socket closed by this side — once timeout_seconds + 0.5 s pass, and
 * single-flight lets the next poll start a new query. A 40 MB answer is cut
 * off after MAX_RESULT_BYTES. The client's own request_timeout is set to 10
 * minutes, so only the shim's timer can be what closes a socket here; no
 * timing is asserted, only who closed what and how much was read.
 */
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

function patientClient(url: string): ClickHouseClient {
  const client = createClient({ url, request_timeout: 600_000, log: { level: ClickHouseLogLevel.OFF } });
  cleanup.push(() => client.close());
  return client;
}

async function open<T extends SocketFaultEndpoint>(make: () => Promise<T>): Promise<T> {
  const endpoint = await make();
  cleanup.push(() => endpoint.close());
  return endpoint;
}

/** A server's handle does nothing after a failed query. */
const NOTHING_AFTER_ERROR = async () => undefined;

const query = compiled('stall', 'SELECT 1 AS value', { timeoutSeconds: 1, deadlineMs: 200, coldHold: 5 });

describe.each(['half-body', 'trickle'] as const)('a response that stalls after its headers (%s)', (mode) => {
  it('the flight settles as a timeout and the shim closes the socket', async () => {
    const server = await open(() => stallServer(mode));
    const report = await fly(patientClient(server.url), query, {}, { afterError: NOTHING_AFTER_ERROR });
    expect(report.outcome).toMatchObject({ kind: 'failed', reason: 'timeout' });
    await vi.waitFor(() => expect(server.closedByClient()).toBe(1), { timeout: 5_000 });
    expect(server.openSockets()).toBe(0);
  });

  it('single-flight releases the key: the next poll starts a new query', async () => {
    const server = await open(() => stallServer(mode));
    const client = patientClient(server.url);
    const t = await makeApp({ queries: [query], clickhouse: serverHandle(client, server.url) });
    cleanup.push(() => t.app.close());
    expect((await get(t.app, '/q/stall')).body).toMatchObject({ value: 5, source: 'cold_hold' });
    expect(server.hits()).toBe(1);
    // Polls keep coming; once the first flight is abandoned, one of them starts the second.
    await vi.waitFor(
      async () => {
        expect((await get(t.app, '/q/stall')).body).toMatchObject({ source: 'cold_hold' });
        expect(server.hits()).toBeGreaterThanOrEqual(2);
      },
      { timeout: 15_000, interval: 200 },
    );
    expect(server.closedByClient()).toBeGreaterThanOrEqual(1);
  });
});

describe('a 40 MB answer', () => {
  it('is cut off after MAX_RESULT_BYTES: a bad result, the socket closed, most of it never sent', async () => {
    const server = await open(() => floodServer(40 * 1024 * 1024));
    const report = await fly(patientClient(server.url), { ...query, timeoutSeconds: 30 }, {}, { afterError: NOTHING_AFTER_ERROR });
    expect(report.outcome).toMatchObject({ kind: 'failed', reason: 'bad_result' });
    expect(report.outcome.kind === 'failed' && report.outcome.message).toMatch(/larger than 1048576 bytes/);
    // Read: the cap plus at most one chunk.
    expect(report.bytesRead).toBeGreaterThan(MAX_RESULT_BYTES);
    expect(report.bytesRead).toBeLessThanOrEqual(MAX_RESULT_BYTES + 1024 * 1024);
    await vi.waitFor(() => expect(server.closedByClient()).toBe(1), { timeout: 5_000 });
    // What the server got rid of before the close: the cap plus kernel socket buffers, far from 40 MB.
    console.info(`[flood] server wrote ${server.bytesWritten()} bytes before the close; the shim read ${report.bytesRead}`);
    expect(server.bytesWritten()).toBeLessThan(16 * 1024 * 1024);
  });
});
