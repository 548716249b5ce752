import { readFileSync } from 'node:fs';
import { credentials, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { startGrpcServer, type RunningGrpc } from '../../../src/shim/grpc/server.js';
import { openTestDatabase, type TestDatabase } from '../../helpers/clickhouse.js';
import { compiled, makeApp, shimConfig, type AppUnderTest } from '../../helpers/shim.js';
import { scalerClient } from '../../helpers/grpc-client.js';
import { needs } from '../../helpers/requirement.js';
import { certDir } from '../../helpers/certs.js';

/**
 * TLS and mutual TLS on the gRPC port with the HTTP listener's files
 * (DFE_KEDA_SHIM_TLS_*), on real sockets with certificates made here by the
 * openssl CLI: a server certificate, a client CA and a client certificate it
 * signed, and a second CA whose client certificate must be refused.
 */
const certs = certDir('grpc-tls');
const at = certs.at;
certs.server();
certs.caAndClient('right');
certs.caAndClient('wrong');

let db: TestDatabase;
const apps: AppUnderTest[] = [];
let tlsOnly: RunningGrpc;
let mutual: RunningGrpc;

async function serve(env: Record<string, string>): Promise<RunningGrpc> {
  const t = await makeApp({ queries: [compiled('one', 'SELECT 2.5')], clickhouse: db.handle, env });
  apps.push(t);
  return startGrpcServer({ ctx: t.app.shim, shim: { host: '127.0.0.1', tls: shimConfig(env).tls }, port: 0, checkIntervalMs: 100, logger: silentLogger() });
}

const SERVER = () => ({ DFE_KEDA_SHIM_TLS_CERT_FILE: at('server.crt'), DFE_KEDA_SHIM_TLS_KEY_FILE: at('server.key') });

beforeAll(async () => {
  if (certs.missing !== undefined) return;
  db = await openTestDatabase('grpc_tls');
  tlsOnly = await serve(SERVER());
  mutual = await serve({ ...SERVER(), DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: at('right-ca.crt') });
});
afterAll(async () => {
  await tlsOnly?.close();
  await mutual?.close();
  for (const t of apps) await t.app.close();
  await db?.close();
  certs.remove();
});

/** GetMetrics over a fresh channel: the value, or the status code of the failure. */
async function valueWith(server: RunningGrpc, client: 'plain' | 'none' | 'right' | 'wrong'): Promise<number | { code: number }> {
  const ca = readFileSync(at('server.crt'));
  const creds =
    client === 'plain'
      ? credentials.createInsecure()
      : client === 'none'
        ? credentials.createSsl(ca)
        : credentials.createSsl(ca, readFileSync(at(`${client}-client.key`)), readFileSync(at(`${client}-client.crt`)));
  const c = scalerClient(server.address, creds);
  try {
    return (await c.getMetrics({ query: 'one' })).metricValues[0]?.metricValueFloat ?? Number.NaN;
  } catch (err) {
    return { code: (err as { code: number }).code };
  } finally {
    c.close();
  }
}

needs(certs.missing).describe('TLS on the gRPC port', () => {
  it('serves a client that trusts the server certificate; a plaintext client is refused', async () => {
    expect(await valueWith(tlsOnly, 'none')).toBe(2.5);
    expect(await valueWith(tlsOnly, 'plain')).toEqual({ code: status.UNAVAILABLE });
  });
});

needs(certs.missing).describe('mutual TLS on the gRPC port', () => {
  it('refuses a client without a certificate, or with one from another CA, in the handshake', async () => {
    expect(await valueWith(mutual, 'none')).toEqual({ code: status.UNAVAILABLE });
    expect(await valueWith(mutual, 'wrong')).toEqual({ code: status.UNAVAILABLE });
  });

  it('serves the client certificate the configured CA signed', async () => {
    expect(await valueWith(mutual, 'right')).toBe(2.5);
  });
});

describe('configuration', () => {
  it('needs mutual TLS when HTTP auth is on: KEDA sends no credential over gRPC but a client certificate', () => {
    expect(() => shimConfig({ DFE_KEDA_SHIM_GRPC_PORT: '9090', DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: '/t' })).toThrow(
      /DFE_KEDA_SHIM_GRPC_PORT with DFE_KEDA_SHIM_AUTH_MODE=bearer needs mutual TLS \(DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE\)/,
    );
  });

  it('is off by default; a port of its own, validated like the HTTP one', () => {
    expect(shimConfig().grpc).toBeUndefined();
    expect(shimConfig({ DFE_KEDA_SHIM_GRPC_PORT: '9090' }).grpc).toEqual({ port: 9090, checkIntervalMs: 1000 });
    expect(() => shimConfig({ DFE_KEDA_SHIM_GRPC_PORT: '8080' })).toThrow(/DFE_KEDA_SHIM_GRPC_PORT=8080 is also DFE_KEDA_SHIM_PORT/);
    expect(() => shimConfig({ DFE_KEDA_SHIM_GRPC_PORT: 'tcp://10.0.0.1:9090' })).toThrow(/DFE_KEDA_SHIM_GRPC_PORT must be a port number/);
    expect(() => shimConfig({ DFE_KEDA_SHIM_GRPC_PORT: '9090', DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS: '0' })).toThrow(/DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS/);
  });
});
