import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDfeError } from '../../src/errors.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from './helpers.js';

/** Optional auth of the query routes (docs/api.md#auth-and-tls), secrets read from files that rotate. */
let db: TestDatabase;
const dir = mkdtempSync(join(tmpdir(), 'dfe-shim-auth-'));
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const queries = [compiled('one', 'SELECT 1', { freshForSeconds: 3600 })];
const apps: AppUnderTest[] = [];

async function appWith(env: Record<string, string>): Promise<AppUnderTest> {
  const t = await makeApp({ queries, clickhouse: db.handle, env });
  apps.push(t);
  return t;
}

beforeAll(async () => {
  db = await openTestDatabase('shim_auth');
});
afterAll(async () => {
  for (const t of apps) await t.app.close();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

describe('bearer', () => {
  it('401 without or with a wrong token, 200 with it; a rotated file works without restart', async () => {
    const tokenFile = file('token', 'first-token\n');
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenFile });
    const missing = await get(t.app, '/q/one');
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer/);
    expect((await get(t.app, '/q/one', { authorization: 'Bearer wrong' })).status).toBe(401);
    expect(t.app.shim.executor.queriesStarted).toBe(0);
    expect(await get(t.app, '/q/one', { authorization: 'Bearer first-token' })).toMatchObject({ status: 200, body: { value: 1 } });
    file('token', 'second-token');
    expect((await get(t.app, '/q/one', { authorization: 'Bearer first-token' })).status).toBe(401);
    expect(await get(t.app, '/keda/hunt-backlog', { authorization: 'Bearer second-token' })).toMatchObject({ status: 404 });
    expect(await get(t.app, '/q/one', { authorization: 'Bearer second-token' })).toMatchObject({ status: 200, body: { value: 1 } });
  });

  it('keeps /livez, /readyz and /metrics open', async () => {
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: file('token2', 't') });
    expect((await get(t.app, '/livez')).status).toBe(200);
    expect((await get(t.app, '/readyz')).status).toBe(503); // not listening yet: not an auth failure
    expect((await get(t.app, '/metrics')).status).toBe(200);
  });

  it('denies (401, not 500) when the secret file is gone', async () => {
    const tokenFile = file('token3', 'x');
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenFile });
    rmSync(tokenFile);
    expect((await get(t.app, '/q/one', { authorization: 'Bearer x' })).status).toBe(401);
  });
});

describe('API key', () => {
  it('accepts X-API-KEY or ?api_key=, which is never part of the cache key', async () => {
    const keyFile = file('apikey', 'k1');
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'apiKey', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: keyFile });
    expect((await get(t.app, '/q/one')).status).toBe(401);
    expect((await get(t.app, '/q/one?api_key=nope')).status).toBe(401);
    expect((await get(t.app, '/q/one', { 'x-api-key': 'k1' })).body).toMatchObject({ value: 1, source: 'fresh' });
    file('apikey', 'k2');
    expect((await get(t.app, '/q/one?api_key=k1')).status).toBe(401);
    // Same cache entry whatever key authorised it: fresh_for reuses it, no new query.
    expect((await get(t.app, '/q/one?api_key=k2')).body).toMatchObject({ value: 1, source: 'fresh' });
    expect(t.app.shim.executor.queriesStarted).toBe(1);
  });
});

describe('basic', () => {
  it('checks both username and password', async () => {
    const t = await appWith({
      DFE_KEDA_SHIM_AUTH_MODE: 'basic',
      DFE_KEDA_SHIM_AUTH_USERNAME_FILE: file('user', 'keda'),
      DFE_KEDA_SHIM_AUTH_PASSWORD_FILE: file('pass', 's3cret:with:colons'),
    });
    expect((await get(t.app, '/q/one', { authorization: basic('keda', 'wrong') })).status).toBe(401);
    expect((await get(t.app, '/q/one', { authorization: basic('other', 's3cret:with:colons') })).status).toBe(401);
    expect((await get(t.app, '/q/one', { authorization: 'Basic !!!' })).status).toBe(401);
    expect((await get(t.app, '/q/one', { authorization: basic('keda', 's3cret:with:colons') })).status).toBe(200);
  });

  it('refuses to build without the secret files the mode needs, naming the key', async () => {
    const err = await makeApp({ queries, clickhouse: db.handle, env: { DFE_KEDA_SHIM_AUTH_MODE: 'basic' } }).catch((e: unknown) => e);
    expect(isDfeError(err, 'CONFIG_INVALID')).toBe(true);
    expect((err as Error).message).toContain('DFE_KEDA_SHIM_AUTH_USERNAME_FILE');
  });
});
