import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { listenShim } from '../../src/shim/server.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, makeApp, shimConfig, type AppUnderTest } from '../helpers/shim.js';
import { missing, tools } from '../helpers/tools.js';
import { needs } from '../helpers/requirement.js';

/**
 * issue 9 item 13: optional client-certificate TLS (KEDA's `tls` auth mode),
 * on a real TLS socket with certificates made here by the openssl CLI: a
 * server certificate, a client CA and a client certificate it signed, and a
 * second CA whose client certificate must be refused.
 */
const dir = mkdtempSync(join(tmpdir(), 'dfe-shim-mtls-'));
const at = (name: string) => join(dir, name);

const opensslMissing = missing('openssl');

/** openssl present but failing is a failure everywhere, not a skip. */
function openssl(args: string[]): boolean {
  const run = spawnSync(tools.openssl!, args, { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${run.error?.message ?? run.stderr}`);
  return true;
}

/** A CA, and a client certificate signed by it (clientAuth usage, as KEDA's would be). */
function makeCaAndClient(prefix: string): boolean {
  writeFileSync(at(`${prefix}-ext.cnf`), 'extendedKeyUsage=clientAuth\n');
  return (
    openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${prefix}-ca`, '-keyout', at(`${prefix}-ca.key`), '-out', at(`${prefix}-ca.crt`)]) &&
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${prefix}-keda`, '-keyout', at(`${prefix}-client.key`), '-out', at(`${prefix}-client.csr`)]) &&
    openssl(['x509', '-req', '-in', at(`${prefix}-client.csr`), '-CA', at(`${prefix}-ca.crt`), '-CAkey', at(`${prefix}-ca.key`), '-CAcreateserial', '-days', '1', '-extfile', at(`${prefix}-ext.cnf`), '-out', at(`${prefix}-client.crt`)])
  );
}

const haveCerts =
  opensslMissing === undefined &&
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', at('server.key'), '-out', at('server.crt')]) &&
  makeCaAndClient('right') &&
  makeCaAndClient('wrong');

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
  rmSync(dir, { recursive: true, force: true });
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

  it('a client CA without TLS is a configuration error naming the variable', () => {
    expect(() => shimConfig({ DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: at('right-ca.crt') })).toThrow(/DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE .*needs TLS/);
  });
});
