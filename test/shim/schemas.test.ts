import fc from 'fast-check';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDfeError } from '../../src/errors.js';
import { parseHold } from '../../src/shim/params.js';
import { QUERY_STRING_SCHEMA } from '../../src/shim/routes/schemas.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * The query routes' querystring schema is attached, not answered
 * (src/shim/routes/schemas.ts): that is only sound while params.ts is
 * stricter than the schema, and while the 401 and 404 still come first.
 */
let db: TestDatabase;
const apps: AppUnderTest[] = [];
beforeAll(async () => {
  db = await openTestDatabase('shim_schemas');
});
afterAll(async () => {
  for (const t of apps) await t.app.close();
  await db?.close();
});

describe('querystring schema', () => {
  it('rejects nothing params.ts accepts (a schema failure is always a params.ts 400)', async () => {
    // Fastify's own validator over the schema, as the routes compile it.
    const app = Fastify();
    app.get('/', { schema: { querystring: QUERY_STRING_SCHEMA }, attachValidation: true }, async (request) => ({
      ok: request.validationError === undefined,
    }));
    const q = compiled('q', 'SELECT 1');
    try {
      const holds = fc.oneof(fc.string(), fc.double().map(String), fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String), fc.constantFrom('', '1e3', '.5', '5.', '-1', '0x10', ' 1'));
      await fc.assert(
        fc.asyncProperty(holds, async (hold) => {
          const res = await app.inject({ method: 'GET', url: '/', query: { hold } });
          const schemaOk = (res.json() as { ok: boolean }).ok;
          let paramsOk = true;
          try {
            parseHold(q, { hold });
          } catch (err) {
            expect(isDfeError(err, 'PARAM_INVALID')).toBe(true);
            paramsOk = false;
          }
          return schemaOk || !paramsOk;
        }),
        { numRuns: 300 },
      );
      // A repeated hold arrives as an array: the schema rejects it, and so does params.ts.
      expect((await app.inject({ method: 'GET', url: '/?hold=1&hold=2' })).json()).toEqual({ ok: false });
    } finally {
      await app.close();
    }
  });
});

describe('order of client mistakes on the query routes', () => {
  it('401 before a bad hold; 404 before a bad hold; the 400 body is params.ts\'s', async () => {
    const queries = [compiled('pressure', 'SELECT 1', { params: ['service'] })];
    const open = await makeApp({ queries, clickhouse: db.handle });
    apps.push(open);
    expect(await get(open.app, '/q/nope?hold=abc')).toMatchObject({ status: 404, body: { error: 'unknown query "nope"', query: 'nope' } });
    expect(await get(open.app, '/keda/pressure?hold=abc')).toMatchObject({
      status: 400,
      body: { error: 'missing required parameter service', query: 'pressure' },
    });
    const bad = await get(open.app, '/keda/pressure?service=a&hold=1&hold=2');
    expect(bad).toMatchObject({ status: 400, body: { query: 'pressure' } });
    expect(bad.body.error).toBe('hold=["1","2"] must be a number from 0 to 9223372036854774 (the trigger\'s target)');
    const guarded = await makeApp({ queries, clickhouse: db.handle, env: { DFE_KEDA_SHIM_AUTH_MODE: 'apiKey', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: '/nonexistent/token' } });
    apps.push(guarded);
    expect((await get(guarded.app, '/keda/pressure?hold=abc')).status).toBe(401);
    expect(guarded.app.shim.executor.queriesStarted).toBe(0);
  });
});
