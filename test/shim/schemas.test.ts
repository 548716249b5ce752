import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDfeError } from '../../src/errors.js';
import { HOLD_PARAM_DOC, parseHold } from '../../src/shim/params.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * `hold` is defined once (src/shim/params.ts): its check and what /openapi.json
 * publishes agree, and the 401 and 404 still come before its 400.
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

describe('the one definition of hold', () => {
  it('accepts exactly the plain decimal numbers inside the range /openapi.json publishes', () => {
    const { minimum, maximum } = HOLD_PARAM_DOC.schema;
    const q = compiled('q', 'SELECT 1');
    const holds = fc.oneof(
      fc.string(),
      fc.double().map(String),
      fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String),
      fc.constantFrom('', '1e3', '.5', '5.', '-1', '0x10', ' 1', 'Infinity', String(maximum), '9223372036854775'),
    );
    fc.assert(
      fc.property(holds, (hold) => {
        let accepted: number | undefined;
        try {
          accepted = parseHold(q, { hold });
        } catch (err) {
          expect(isDfeError(err, 'PARAM_INVALID')).toBe(true);
        }
        const plain = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(hold);
        const n = Number(hold);
        expect(accepted !== undefined, hold).toBe(plain && n >= minimum && n <= maximum);
      }),
      { numRuns: 500 },
    );
    // A repeated hold arrives as an array: a 400 too.
    expect(() => parseHold(q, { hold: ['1', '2'] })).toThrow(/hold=/);
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
