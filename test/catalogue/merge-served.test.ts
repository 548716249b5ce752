import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { applySchema } from '../../src/coordination/topology.js';
import { buildShimApp } from '../../src/shim/app.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

/**
 * The merge rules of docs/catalogue.md#merge-rules end to end: a built-in file and an override file
 * on disk, loaded by the production store, served by the shim and answered by
 * SQL on the real engine. Each answer shows one rule took effect (the pure
 * rules are in merge.test.ts, the validation rules in validation.test.ts).
 */
const dir = mkdtempSync(join(tmpdir(), 'dfe-merge-served-'));
let db: TestDatabase;
let store: CatalogueStore;
let app: FastifyInstance;

const BUILTIN = `queries:
  binds-merge:
    sql: "SELECT {a:UInt32} * 100 + {b:UInt32} AS value"
    binds: {a: 1, b: 2}
  list-replace:
    sql: "SELECT length({x:String}) AS value"
    params: [x]
  scalar-replace:
    sql: "SELECT 500 AS value"
    clamp_min: 0
    clamp_max: 100
  null-drops-bound:
    sql: "SELECT 500 AS value"
    clamp_max: 100
  sql-over-builtin:
    builtin: hunt_backlog
  builtin-over-sql:
    sql: "SELECT 99 AS value"
  disabled:
    sql: "SELECT 1 AS value"
`;

// list-replace: the built-in param x is replaced by y (a list is never concatenated).
const OVERRIDE = `queries:
  binds-merge:
    binds: {b: 7}
  list-replace:
    sql: "SELECT length({y:String}) AS value"
    params: [y]
  scalar-replace:
    clamp_max: 50
  null-drops-bound:
    clamp_max: null
  sql-over-builtin:
    sql: "SELECT 42 AS value"
  builtin-over-sql:
    builtin: hunt_backlog
  disabled:
    enabled: false
  added:
    sql: "SELECT 3 AS value"
`;

beforeAll(async () => {
  db = await openTestDatabase('merge_served');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  const builtinPath = join(dir, 'queries.yaml');
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(builtinPath, BUILTIN);
  writeFileSync(overridePath, OVERRIDE);
  store = await CatalogueStore.open({ builtinPath, overridePath, dataDatabase: db.database, otelDatabase: db.database, builtins: SHIM_CATALOGUE_BUILTINS, clock: new ManualClock(0) });
  app = await buildShimApp({ catalogue: store, clickhouse: db.handle, config: loadConfig({}), registry: new Registry() });
});
afterAll(async () => {
  await app?.close();
  store?.stop();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function answer(url: string): Promise<{ status: number; value: unknown }> {
  const res = await app.inject({ method: 'GET', url });
  return { status: res.statusCode, value: (res.json() as { value?: unknown }).value };
}

describe('merge rules, served by the real engine', () => {
  it('maps merge key by key: the override sets b, the built-in a stays', async () => {
    expect(await answer('/q/binds-merge')).toEqual({ status: 200, value: 107 });
  });

  it('lists replace: only the override param is required', async () => {
    expect(await answer('/q/list-replace?y=abcd')).toEqual({ status: 200, value: 4 });
    expect((await answer('/q/list-replace?x=abcd')).status).toBe(400);
  });

  it('scalars replace, keys the override leaves out stay', async () => {
    expect(await answer('/q/scalar-replace')).toEqual({ status: 200, value: 50 });
  });

  it('an explicit null drops a built-in bound', async () => {
    expect(await answer('/q/null-drops-bound')).toEqual({ status: 200, value: 500 });
  });

  it('sql in the override replaces a builtin, and builtin replaces sql', async () => {
    expect(await answer('/q/sql-over-builtin')).toEqual({ status: 200, value: 42 });
    expect(await answer('/q/builtin-over-sql')).toEqual({ status: 200, value: 0 });
  });

  it('enabled: false removes a query (404); a new name adds one', async () => {
    expect((await answer('/q/disabled')).status).toBe(404);
    expect(await answer('/q/added')).toEqual({ status: 200, value: 3 });
  });
});
