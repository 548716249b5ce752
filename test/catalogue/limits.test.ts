import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalogue, MAX_CATALOGUE_BYTES } from '../../src/catalogue/load.js';
import { readYamlTextOffThread } from '../../src/catalogue/off-thread.js';
import { parseCatalogueText } from '../../src/catalogue/parse.js';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { DfeError, isDfeError } from '../../src/errors.js';
import { buildShimApp } from '../../src/shim/app.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * issue 9 item 6: a large override must not freeze the event loop. The size
 * is capped (1 MiB, checked by stat before reading), the query count is capped
 * (DFE_KEDA_SHIM_MAX_QUERIES), duplicate keys are found in linear time, and
 * the YAML is parsed in a worker thread while polls keep being answered.
 */
const dir = mkdtempSync(join(tmpdir(), 'dfe-catalogue-limits-'));
const DBS = { dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS, clock: new ManualClock(0) };
const BUILTIN = join(dir, 'builtin.yaml');
let db: TestDatabase;

beforeAll(async () => {
  writeFileSync(BUILTIN, 'queries:\n  base: {sql: SELECT 1 AS value, fresh_for_seconds: 3600}\n');
  db = await openTestDatabase('catalogue_limits');
});
afterAll(async () => {
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function failure(p: Promise<unknown>): Promise<DfeError> {
  try {
    await p;
  } catch (err) {
    if (isDfeError(err)) return err;
    throw err;
  }
  throw new Error('expected a DfeError');
}

/** `count` queries, one line each. */
const manyQueries = (count: number) => `queries:\n${Array.from({ length: count }, (_, i) => `  q${i}: {sql: SELECT ${i} AS value}\n`).join('')}`;
/** One query whose binds map has `count` keys: 20 000 took the yaml library's quadratic duplicate check ~3 s. */
const manyBindKeys = (count: number) => `queries:\n  wide:\n    sql: SELECT 1 AS value\n    binds:\n${Array.from({ length: count }, (_, i) => `      k${i}: ${i}\n`).join('')}`;

describe('size cap', () => {
  it('a file over 1 MiB is rejected from its size alone (a 50 MB sparse file is never read), naming file and size', async () => {
    const path = join(dir, 'huge.yaml');
    writeFileSync(path, '');
    truncateSync(path, 50 * 1024 * 1024); // sparse: reading it would take the time and memory the cap exists to avoid
    const err = await failure(loadCatalogue({ ...DBS, builtinPath: BUILTIN, overridePath: path }));
    expect({ code: err.code, file: err.file }).toEqual({ code: 'CATALOGUE_INVALID', file: path });
    expect(err.message).toBe(`${path}: the override query catalogue is ${50 * 1024 * 1024} bytes, more than ${MAX_CATALOGUE_BYTES} (1 MiB, what a ConfigMap holds); not read`);
  });

  it('exactly 1 MiB is still read', async () => {
    const path = join(dir, 'edge.yaml');
    const head = 'queries:\n  a: {sql: SELECT 1 AS value}\n';
    writeFileSync(path, head + '#'.repeat(MAX_CATALOGUE_BYTES - head.length - 1) + '\n');
    expect([...(await loadCatalogue({ ...DBS, builtinPath: BUILTIN, overridePath: path })).queries.keys()].sort()).toEqual(['a', 'base']);
  });
});

describe('query count cap', () => {
  it('more queries than DFE_KEDA_SHIM_MAX_QUERIES is rejected before the tree is built, naming file, count and setting', async () => {
    const path = join(dir, 'many.yaml');
    writeFileSync(path, manyQueries(1001));
    const err = await failure(loadCatalogue({ ...DBS, builtinPath: BUILTIN, overridePath: path }));
    expect(err.message).toBe(`${path}: key "queries": defines 1001 queries, more than the limit of 1000 (DFE_KEDA_SHIM_MAX_QUERIES)`);
    expect([...(await loadCatalogue({ ...DBS, builtinPath: BUILTIN, overridePath: path, maxQueries: 1001 })).queries.keys()]).toHaveLength(1002);
  });

  it('the setting is validated and defaults to 1000', () => {
    expect(loadConfig({}).shim.maxQueries).toBe(1000);
    expect(loadConfig({ DFE_KEDA_SHIM_MAX_QUERIES: '50' }).shim.maxQueries).toBe(50);
    expect(() => loadConfig({ DFE_KEDA_SHIM_MAX_QUERIES: '0' })).toThrow(/DFE_KEDA_SHIM_MAX_QUERIES/);
  });
});

describe('duplicate keys', () => {
  it('are still an error, with line and column, found in one pass', () => {
    expect(() => parseCatalogueText(`${manyBindKeys(20_000)}      k7: 1\n`, 'dup.yaml')).toThrow(/^dup\.yaml: is not valid YAML: Map keys must be unique at line 20005, column 7/);
  });

  it('20 000 distinct keys parse (the library\'s quadratic check is off)', () => {
    expect(Object.keys(parseCatalogueText(manyBindKeys(20_000), 'wide.yaml').queries.get('wide')?.binds ?? {})).toHaveLength(20_000);
  });
});

describe('the event loop stays free while a large override loads', () => {
  it('the YAML step runs off the thread: the loop turns while it parses (a synchronous parse allows no turn)', async () => {
    let turns = 0;
    let done = false;
    const parsing = readYamlTextOffThread(manyBindKeys(20_000), { maxQueries: 1000, timeoutMs: 60_000 }).finally(() => (done = true));
    while (!done) {
      turns++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const outcome = await parsing;
    expect(outcome.ok).toBe(true);
    expect(turns).toBeGreaterThan(1);
  });

  it('a parse past its time limit is abandoned (the worker is terminated), not waited for', async () => {
    expect(await readYamlTextOffThread(manyBindKeys(20_000), { maxQueries: 1000, timeoutMs: 1 })).toEqual({
      ok: false,
      problem: 'took longer than 1 ms to parse; not loaded',
    });
  });

  let app: FastifyInstance;
  let store: CatalogueStore;

  afterAll(async () => {
    store?.stop();
    await app?.close();
  });

  it('polls are answered while the reload is in progress', async () => {
    const path = join(dir, 'override.yaml');
    writeFileSync(path, 'queries:\n  extra: {sql: SELECT 7 AS value, fresh_for_seconds: 3600}\n');
    store = await CatalogueStore.open({ ...DBS, dataDatabase: db.database, otelDatabase: db.database, builtinPath: BUILTIN, overridePath: path });
    app = await buildShimApp({ catalogue: store, clickhouse: db.handle, config: loadConfig({}), registry: new Registry() });
    const poll = async () => (await app.inject({ method: 'GET', url: '/q/extra' })).statusCode;
    expect(await poll()).toBe(200);

    // Legal but heavy: ~1 MiB of nested maps, 1000 queries (the cap) with many keys each.
    const body = Array.from({ length: 1000 }, (_, i) => `  q${i}:\n    sql: SELECT 1 AS value\n    binds: {${Array.from({ length: 60 }, (_, k) => `b${k}: ${k}`).join(', ')}}\n`).join('');
    const text = `queries:\n${body}`.slice(0, MAX_CATALOGUE_BYTES);
    writeFileSync(path, text.slice(0, text.lastIndexOf('\n  q')) + '\n');

    let pending = true;
    const reload = store.reload().finally(() => (pending = false));
    let answeredDuringReload = 0;
    const statuses = new Set<number>();
    // Poll as KEDA would, without waiting for the reload: every answer that lands while it is pending counts.
    while (pending) {
      const status = await poll();
      statuses.add(status);
      if (pending) answeredDuringReload++;
      // inject() resolves on microtasks: give the loop a turn, as real sockets would.
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await reload).toBe('rejected'); // binds without placeholders: parsed, validated, rejected
    expect([...statuses]).toEqual([200]);
    expect(answeredDuringReload).toBeGreaterThan(0);
  });
});
