import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openClickHouse } from '../../src/clickhouse/client.js';
import { loadConfig } from '../../src/config/load.js';
import { listenShim } from '../../src/shim/server.js';
import { refusedPort } from '../helpers/faults.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, makeApp, shimConfig, type AppUnderTest } from '../helpers/shim.js';
import { certDir } from '../helpers/certs.js';
import { needs } from '../helpers/requirement.js';

/**
 * issue 9 item 13: optional client-certificate TLS (KEDA's `tls` auth mode),
 * on a real TLS socket with certificates made here by the openssl CLI: a
 * server certificate, a client CA and a client certificate it signed, and a
 * second CA whose client certificate must be refused.
 */
const certs = certDir('shim-mtls');
const at = certs.at;
const opensslMissing = certs.missing;
certs.server();
certs.caAndClient('right');
certs.caAndClient('wrong');
certs.replica('replica-a', 'right');
certs.replica('replica-b', 'right');
certs.replica('stranger', 'wrong');
const haveCerts = opensslMissing === undefined;

let db: TestDatabase;
let t: AppUnderTest;
let base = '';

beforeAll(async () => {
  if (!haveCerts) return;
  db = await openTestDatabase('shim_mtls');
  t = await makeApp({
    queries: [compiled('one', 'SELECT 2.5')],
    clickhouse: db.handle,
    env: { DFE_KEDA_SHIM_TLS_CERT_FILE: at('server.crt'), DFE_KEDA_SHIM_TLS_KEY_FILE: at('server.key'), DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: at('right-ca.crt') },
  });
  base = await listenShim(t.app, { host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
  certs.remove();
});

type Outcome = { kind: 'answered'; status: number; body: unknown } | { kind: 'refused'; code: string };

/** One GET over a fresh TLS connection with the given client certificate (or none). */
function getWith(client: 'none' | 'right' | 'wrong'): Promise<Outcome> {
  return new Promise((resolve) => {
    const cert = client === 'none' ? {} : { cert: readFileSync(at(`${client}-client.crt`)), key: readFileSync(at(`${client}-client.key`)) };
    const req = request(`${base}/q/one`, { ca: readFileSync(at('server.crt')), agent: false, ...cert }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ kind: 'answered', status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ kind: 'refused', code: err.code ?? err.message }));
    req.end();
  });
}

needs(opensslMissing).describe('client-certificate TLS', () => {
  it('no client certificate → refused in the handshake', async () => {
    expect((await getWith('none')).kind).toBe('refused');
  });

  it('a client certificate from another CA → refused', async () => {
    expect((await getWith('wrong')).kind).toBe('refused');
  });

  it('the client certificate the configured CA signed → 200', async () => {
    expect(await getWith('right')).toEqual({ kind: 'answered', status: 200, body: { value: 2.5, source: 'fresh', age_seconds: 0 } });
  });

  it('replicas under mutual TLS: a cold key gets its peer\'s value over https with the replica certificate; a certificate from another CA is refused (error, cold_hold)', async () => {
    const mtls = (replica: string) => ({
      DFE_KEDA_SHIM_TLS_CERT_FILE: at(`${replica}.crt`),
      DFE_KEDA_SHIM_TLS_KEY_FILE: at(`${replica}.key`),
      DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: at('right-ca.crt'),
    });
    const coldOne = compiled('one', 'SELECT 7', { coldHold: 3 });
    const a = await makeApp({ queries: [coldOne], clickhouse: db.handle, env: mtls('replica-a') });
    const refused = await refusedPort();
    const failing = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: refused.url }).clickhouse);
    const others: AppUnderTest[] = [];
    try {
      const peerBase = await listenShim(a.app, { host: '127.0.0.1', port: 0 });
      expect((await a.app.inject('/q/one')).json()).toMatchObject({ value: 7, source: 'fresh' });
      const replica = async (name: string, extra: Record<string, string> = {}) => {
        const t = await makeApp({
          queries: [coldOne],
          clickhouse: failing,
          env: { ...mtls(name), DFE_KEDA_SHIM_PEERS: peerBase, DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '5000', ...extra },
        });
        others.push(t);
        return t;
      };
      const b = await replica('replica-b');
      expect((await b.app.inject('/q/one')).json()).toMatchObject({ value: 7, source: 'last_good' });
      expect((await b.app.inject('/metrics')).body).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="found"\} 1/);
      // Its certificate is from another CA: the peer refuses the handshake.
      const c = await replica('stranger', { DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: at('wrong-ca.crt') });
      expect((await c.app.inject('/q/one')).json()).toEqual({ value: 3, source: 'cold_hold', age_seconds: 0 });
      expect((await c.app.inject('/metrics')).body).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="error"\} 1/);
    } finally {
      for (const t of others) await t.app.close();
      await a.app.close();
      await failing.close();
      await refused.close();
    }
  });

  it('replicas under TLS without client certificates, sharing one self-signed certificate, trust each other as peers', async () => {
    const tlsOnly = { DFE_KEDA_SHIM_TLS_CERT_FILE: at('server.crt'), DFE_KEDA_SHIM_TLS_KEY_FILE: at('server.key') };
    const coldOne = compiled('one', 'SELECT 7', { coldHold: 3 });
    const a = await makeApp({ queries: [coldOne], clickhouse: db.handle, env: tlsOnly });
    const refused = await refusedPort();
    const failing = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: refused.url }).clickhouse);
    let b: AppUnderTest | undefined;
    try {
      const peerBase = await listenShim(a.app, { host: '127.0.0.1', port: 0 });
      expect((await a.app.inject('/q/one')).json()).toMatchObject({ value: 7, source: 'fresh' });
      b = await makeApp({ queries: [coldOne], clickhouse: failing, env: { ...tlsOnly, DFE_KEDA_SHIM_PEERS: peerBase, DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '5000' } });
      expect((await b.app.inject('/q/one')).json()).toMatchObject({ value: 7, source: 'last_good' });
    } finally {
      await b?.app.close();
      await a.app.close();
      await failing.close();
    }
  });

  it('replicas under TLS with certificates of a private CA: untrusted as peers, until NODE_EXTRA_CA_CERTS names that CA', async () => {
    const tlsOnly = (replica: string) => ({ DFE_KEDA_SHIM_TLS_CERT_FILE: at(`${replica}.crt`), DFE_KEDA_SHIM_TLS_KEY_FILE: at(`${replica}.key`) });
    const coldOne = compiled('one', 'SELECT 7', { coldHold: 3 });
    const a = await makeApp({ queries: [coldOne], clickhouse: db.handle, env: tlsOnly('replica-a') });
    const refused = await refusedPort();
    const failing = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: refused.url }).clickhouse);
    const others: AppUnderTest[] = [];
    const before = process.env.NODE_EXTRA_CA_CERTS;
    try {
      const peerBase = await listenShim(a.app, { host: '127.0.0.1', port: 0 });
      expect((await a.app.inject('/q/one')).json()).toMatchObject({ value: 7, source: 'fresh' });
      const replicaB = async () => {
        const t = await makeApp({ queries: [coldOne], clickhouse: failing, env: { ...tlsOnly('replica-b'), DFE_KEDA_SHIM_PEERS: peerBase, DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '5000' } });
        others.push(t);
        return t;
      };
      delete process.env.NODE_EXTRA_CA_CERTS;
      expect((await (await replicaB()).app.inject('/q/one')).json()).toEqual({ value: 3, source: 'cold_hold', age_seconds: 0 });
      process.env.NODE_EXTRA_CA_CERTS = at('right-ca.crt');
      expect((await (await replicaB()).app.inject('/q/one')).json()).toMatchObject({ value: 7, source: 'last_good' });
    } finally {
      if (before === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
      else process.env.NODE_EXTRA_CA_CERTS = before;
      for (const t of others) await t.app.close();
      await a.app.close();
      await failing.close();
    }
  });

  it('a client CA without TLS is a configuration error naming the variable', () => {
    expect(() => shimConfig({ DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: at('right-ca.crt') })).toThrow(/DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE .*needs TLS/);
  });
});
