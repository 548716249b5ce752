import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDfeError } from '../../src/errors.js';
import { listenShim } from '../../src/shim/server.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, makeApp, type AppUnderTest } from '../helpers/shim.js';
import { certDir } from '../helpers/certs.js';
import { needs } from '../helpers/requirement.js';

/**
 * TLS on the listener, through a real socket (a self-signed certificate made
 * by openssl for 127.0.0.1), and readyz turning 200 once the server listens.
 */
const certs = certDir('shim-tls');
certs.server();
const certFile = certs.at('server.crt');
const keyFile = certs.at('server.key');
const opensslMissing = certs.missing;
const haveCert = opensslMissing === undefined;

let db: TestDatabase;
let t: AppUnderTest;
let base = '';

beforeAll(async () => {
  if (!haveCert) return;
  db = await openTestDatabase('shim_tls');
  t = await makeApp({
    queries: [compiled('one', 'SELECT 1.5')],
    clickhouse: db.handle,
    env: { DFE_KEDA_SHIM_TLS_CERT_FILE: certFile, DFE_KEDA_SHIM_TLS_KEY_FILE: keyFile },
  });
});
afterAll(async () => {
  await t?.app.close();
  await db?.close();
  certs.remove();
});

function getJson(path: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { ca: readFileSync(certFile) }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }));
    });
    req.on('error', reject);
    req.end();
  });
}

needs(opensslMissing).describe('TLS listener', () => {
  it('is not ready before listening, then serves queries and readyz over https', async () => {
    expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(503);
    base = await listenShim(t.app, { host: '127.0.0.1', port: 0 });
    expect(base).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(await getJson('/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
    expect(await getJson('/q/one')).toEqual({ status: 200, body: { value: 1.5, source: 'fresh', age_seconds: 0 } });
  });
});

describe('TLS files that cannot be read', () => {
  it('are a config error naming the setting and the path', async () => {
    const missing = certs.at('missing.crt');
    const err = await makeApp({
      queries: [compiled('one', 'SELECT 1')],
      clickhouse: { backend: 'embedded', target: 'unused', client: undefined as never, afterQueryError: async () => undefined },
      env: { DFE_KEDA_SHIM_TLS_CERT_FILE: missing, DFE_KEDA_SHIM_TLS_KEY_FILE: keyFile },
    }).catch((e: unknown) => e);
    expect(isDfeError(err, 'CONFIG_INVALID')).toBe(true);
    expect((err as Error).message).toContain(`DFE_KEDA_SHIM_TLS_CERT_FILE=${JSON.stringify(missing)}`);
  });
});
