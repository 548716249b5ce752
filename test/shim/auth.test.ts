import { capturingLogger } from '../helpers/logger.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDfeError } from '../../src/errors.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, shimConfig, type AppUnderTest } from '../helpers/shim.js';

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

/** issue 9 item 8: an empty or unreadable secret denies everything, and says so once. */
describe('fail closed', () => {
  it('Bearer \\xA0 with an empty token file → 401 (no Unicode-space trimming into a match)', async () => {
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: file('empty-token', '') });
    for (const value of ['Bearer \xA0', 'Bearer \u3000', 'Bearer \u2028', 'Bearer  ']) {
      const res = await t.app.inject({ method: 'GET', url: '/q/one', headers: { authorization: value } });
      expect({ value, status: res.statusCode }).toEqual({ value, status: 401 });
    }
  });

  it('Basic Og== (empty user and password) with empty files → 401; with set files → 401', async () => {
    const empty = await appWith({
      DFE_KEDA_SHIM_AUTH_MODE: 'basic',
      DFE_KEDA_SHIM_AUTH_USERNAME_FILE: file('empty-user', ''),
      DFE_KEDA_SHIM_AUTH_PASSWORD_FILE: file('empty-pass', '\n'),
    });
    expect((await get(empty.app, '/q/one', { authorization: 'Basic Og==' })).status).toBe(401);
    const set = await appWith({
      DFE_KEDA_SHIM_AUTH_MODE: 'basic',
      DFE_KEDA_SHIM_AUTH_USERNAME_FILE: file('u2', 'keda\n'),
      DFE_KEDA_SHIM_AUTH_PASSWORD_FILE: file('p2', 'pw\r\n'),
    });
    expect((await get(set.app, '/q/one', { authorization: 'Basic Og==' })).status).toBe(401);
    // A trailing line ending in a mounted secret is normal: stripped.
    expect((await get(set.app, '/q/one', { authorization: basic('keda', 'pw') })).status).toBe(200);
  });

  it('only trailing line endings are stripped from a secret: a token with a space or U+00A0 must be sent exactly', async () => {
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'apiKey', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: file('nbsp-key', '\xA0k\xA0\n') });
    expect((await get(t.app, '/q/one?api_key=k')).status).toBe(401);
    expect((await get(t.app, `/q/one?api_key=${encodeURIComponent('\xA0k\xA0')}`)).status).toBe(200);
  });

  it('an empty or unreadable secret is logged once (naming the file, never the secret), and again when it changes', async () => {
    const { logger, lines } = capturingLogger();
    const tokenFile = file('logged-token', '');
    const t = await makeApp({ queries, clickhouse: db.handle, env: { DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenFile }, logger });
    apps.push(t);
    const authLines = () => lines.filter((l) => String(l.msg).startsWith('auth secret file'));
    expect(authLines()).toEqual([expect.objectContaining({ level: 50, file: tokenFile, msg: 'auth secret file is empty: every query request is denied (401)' })]);
    for (let i = 0; i < 3; i++) expect((await get(t.app, '/q/one', { authorization: 'Bearer x' })).status).toBe(401);
    expect(authLines()).toHaveLength(1); // once, not per poll
    file('logged-token', 'SECRET-VALUE-9\n');
    expect((await get(t.app, '/q/one', { authorization: 'Bearer SECRET-VALUE-9' })).status).toBe(200);
    rmSync(tokenFile);
    expect((await get(t.app, '/q/one', { authorization: 'Bearer SECRET-VALUE-9' })).status).toBe(401);
    expect(authLines().map((l) => l.msg)).toEqual([
      'auth secret file is empty: every query request is denied (401)',
      'auth secret file readable again',
      'auth secret file unreadable: every query request is denied (401)',
    ]);
    expect(JSON.stringify(lines)).not.toContain('SECRET-VALUE-9');
  });
});

/** issue 9 item 12: KEDA's apiKey mode lets the user name the header or parameter (keyParamName). */
describe('API key names', () => {
  it('the header and the query parameter are settings; the defaults stop working when renamed', async () => {
    const t = await appWith({
      DFE_KEDA_SHIM_AUTH_MODE: 'apiKey',
      DFE_KEDA_SHIM_AUTH_TOKEN_FILE: file('named-key', 'k9'),
      DFE_KEDA_SHIM_AUTH_API_KEY_HEADER: 'X-Shim-Key',
      DFE_KEDA_SHIM_AUTH_API_KEY_PARAM: 'shim_key',
    });
    expect((await get(t.app, '/q/one', { 'x-shim-key': 'k9' })).status).toBe(200);
    expect((await get(t.app, '/q/one?shim_key=k9')).status).toBe(200);
    expect((await get(t.app, '/q/one', { 'x-api-key': 'k9' })).status).toBe(401);
    expect((await get(t.app, '/q/one?api_key=k9')).status).toBe(401);
  });

  it('the names are validated, naming the variable', () => {
    expect(() => shimConfig({ DFE_KEDA_SHIM_AUTH_API_KEY_HEADER: 'X Bad' })).toThrow(/DFE_KEDA_SHIM_AUTH_API_KEY_HEADER="X Bad": must be an HTTP header name/);
    expect(() => shimConfig({ DFE_KEDA_SHIM_AUTH_API_KEY_PARAM: 'hold' })).toThrow(/DFE_KEDA_SHIM_AUTH_API_KEY_PARAM="hold"/);
    expect(shimConfig({}).auth).toMatchObject({ apiKeyHeader: 'X-API-KEY', apiKeyParam: 'api_key' });
  });
});

describe('a renamed API-key header or parameter is redacted like the defaults', () => {
  it('never reaches a log line', async () => {
    const { pino } = await import('pino');
    const { apiKeyRedactPaths, loggerOptions } = await import('../../src/log.js');
    const lines: string[] = [];
    const logger = pino(loggerOptions({ level: 'info', format: 'json', redact: apiKeyRedactPaths('X-Shim-Key', 'shim.key') }), { write: (l: string) => void lines.push(l) });
    logger.info({ req: { headers: { 'x-shim-key': 'SECRET-H' }, query: { 'shim.key': 'SECRET-Q', other: 'kept' } } }, 'request');
    expect(lines.join('')).not.toMatch(/SECRET-[HQ]/);
    expect(lines.join('')).toContain('kept');
  });
});
