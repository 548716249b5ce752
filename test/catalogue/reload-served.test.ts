import { capturingLogger } from '../helpers/logger.js';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CatalogueStore } from '../../src/catalogue/store.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { buildShimApp } from '../../src/shim/app.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * issue 9 item 5, on the real reload path: files on disk, the production
 * store (watch + interval + explicit reload), the shim answering from the real
 * engine. A 0-byte override — the kubelet publishing an empty file, or a writer
 * that truncates before it writes — is not a catalogue: the old one keeps
 * serving (no 404), its cached values are kept (no new query), and the reload
 * is counted as rejected with a warning naming the file.
 */
const BUILTIN = 'queries:\n  base: {sql: SELECT 1 AS value, fresh_for_seconds: 3600}\n';
const V1 = 'queries:\n  extra: {sql: SELECT 7 AS value, fresh_for_seconds: 3600}\n';
const V2 = 'queries:\n  extra: {sql: SELECT 8 AS value, fresh_for_seconds: 3600}\n';

let db: TestDatabase;
const dirs: string[] = [];
const opened: { store: CatalogueStore; app: FastifyInstance }[] = [];

beforeAll(async () => {
  db = await openTestDatabase('reload_served');
});
afterEach(async () => {
  for (const { store, app } of opened.splice(0)) {
    store.stop();
    await app.close();
  }
});
afterAll(async () => {
  await db?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-reload-served-'));
  dirs.push(dir);
  return dir;
}

/** What a kubelet does with a mounted ConfigMap: new timestamped dir, then an atomic swap of `..data`. */
class ConfigMapDir {
  private generation = 0;
  readonly dir = tempDir();
  readonly path = join(this.dir, 'override.yaml');
  constructor(text: string) {
    this.publish(text);
    symlinkSync('..data/override.yaml', this.path);
  }
  publish(text: string): void {
    const version = `..2026_${++this.generation}`;
    mkdirSync(join(this.dir, version));
    writeFileSync(join(this.dir, version, 'override.yaml'), text);
    symlinkSync(version, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}

async function serve(overridePath: string) {
  const builtinPath = join(tempDir(), 'queries.yaml');
  writeFileSync(builtinPath, BUILTIN);
  const { logger, lines } = capturingLogger();
  const store = await CatalogueStore.open({
    builtinPath,
    overridePath,
    dataDatabase: db.database,
    otelDatabase: db.database,
    builtins: SHIM_CATALOGUE_BUILTINS,
    clock: new ManualClock(0),
    reloadIntervalMs: 50,
    watchDebounceMs: 10,
  });
  const registry = new Registry();
  const app = await buildShimApp({ catalogue: store, clickhouse: db.handle, config: loadConfig({}), registry, logger });
  store.start();
  opened.push({ store, app });
  const answer = async (name: string) => {
    const res = await app.inject({ method: 'GET', url: `/q/${name}` });
    return { status: res.statusCode, value: (res.json() as { value?: unknown }).value };
  };
  const rejected = async () => {
    const metric = await registry.getSingleMetricAsString('dfe_keda_shim_catalogue_reloads_total');
    return Number(/result="rejected"\} (\d+)/.exec(metric)?.[1] ?? 0);
  };
  return { store, app, lines, answer, rejected };
}

/** Requests injected while `during` runs (reloads in progress, files half-written): every one is recorded. */
async function pollWhile(answer: (name: string) => Promise<{ status: number; value: unknown }>, during: Promise<unknown>) {
  const seen: { status: number; value: unknown }[] = [];
  let done = false;
  void during.finally(() => (done = true));
  while (!done) {
    seen.push(await answer('extra'), await answer('base'));
    await new Promise((resolve) => setImmediate(resolve));
  }
  await during;
  return seen;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (bounded) until the rejected-reload counter moves; no timing assertion. */
async function untilRejected(rejected: () => Promise<number>, atLeast: number) {
  const until = Date.now() + 15_000;
  while ((await rejected()) < atLeast) {
    if (Date.now() > until) throw new Error('no rejected reload within 15 s');
    await sleep(20);
  }
}

describe('a 0-byte override keeps the old catalogue', () => {
  it('the kubelet publishes an empty file: no 404, no new query, one warning naming the file, counted', async () => {
    const cm = new ConfigMapDir(V1);
    const t = await serve(cm.path);
    expect(await t.answer('extra')).toEqual({ status: 200, value: 7 });
    expect(await t.answer('base')).toEqual({ status: 200, value: 1 });
    const started = t.app.shim.executor.queriesStarted;

    cm.publish('');
    const seen = await pollWhile(t.answer, (async () => {
      expect(await t.store.reload()).toBe('rejected');
      await untilRejected(t.rejected, 1);
      await sleep(200); // the watch and the interval see the same empty file: still rejected, not re-logged
    })());

    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((s) => s.status !== 200)).toEqual([]);
    expect(new Set(seen.filter((_, i) => i % 2 === 0).map((s) => s.value))).toEqual(new Set([7]));
    expect([...t.store.current().queries.keys()].sort()).toEqual(['base', 'extra']);
    // The last-good (here: fresh-for) values stayed: not one query ran again.
    expect(t.app.shim.executor.queriesStarted).toBe(started);
    const warnings = t.lines.filter((l) => l.msg === 'catalogue file is empty (a write in progress?); the previous catalogue keeps serving');
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings[0]).toMatchObject({ level: 40, file: cm.path });
    expect(String((warnings[0]?.err as { message?: unknown } | undefined)?.message)).toContain('queries: {}');

    // The real content arrives: applied as usual.
    cm.publish(V2);
    expect(['applied', 'unchanged']).toContain(await t.store.reload()); // the watch may have been first
    expect(await t.answer('extra')).toEqual({ status: 200, value: 8 });
  });

  it('a writer that truncates, then writes in two chunks: every poll in between answers 200 with the old value', async () => {
    const path = join(tempDir(), 'override.yaml');
    writeFileSync(path, V1);
    const t = await serve(path);
    expect(await t.answer('extra')).toEqual({ status: 200, value: 7 });
    expect(await t.answer('base')).toEqual({ status: 200, value: 1 });
    const started = t.app.shim.executor.queriesStarted;

    const writer = (async () => {
      truncateSync(path, 0);
      await untilRejected(t.rejected, 1); // the watch or interval saw the 0-byte file
      expect(await t.store.reload()).toBe('rejected');
      writeFileSync(path, V2.slice(0, V2.indexOf('SELECT') + 3)); // half a flow map: invalid YAML
      expect(await t.store.reload()).toBe('rejected');
      await sleep(100);
      writeFileSync(path, V2);
    })();
    const seen = await pollWhile(t.answer, writer);

    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((s) => s.status !== 200)).toEqual([]);
    // Until the whole file is there, the old value; afterwards possibly the new one, never anything else.
    expect([...new Set(seen.filter((_, i) => i % 2 === 0).map((s) => s.value))].every((v) => v === 7 || v === 8)).toBe(true);
    expect(t.app.shim.executor.queriesStarted).toBeLessThanOrEqual(started + 1);
    expect(t.lines.some((l) => l.level === 40 && l.file === path)).toBe(true);

    expect(['applied', 'unchanged']).toContain(await t.store.reload());
    expect(await t.answer('extra')).toEqual({ status: 200, value: 8 });
  });

  it('an intentional empty override (queries: {}) applies: the override query goes, the built-in stays', async () => {
    const cm = new ConfigMapDir(V1);
    const t = await serve(cm.path);
    cm.publish('queries: {}\n');
    expect(['applied', 'unchanged']).toContain(await t.store.reload());
    expect((await t.answer('extra')).status).toBe(404);
    expect(await t.answer('base')).toEqual({ status: 200, value: 1 });
  });
});
