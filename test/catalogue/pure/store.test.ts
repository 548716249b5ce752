import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CatalogueStore } from '../../../src/catalogue/store.js';
import type { CatalogueEvent } from '../../../src/catalogue/types.js';
import { ManualClock } from '../../../src/clock.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../../src/shim/catalogue-builtins.js';

/**
 * Hot reload against the layout a kubelet gives a mounted ConfigMap:
 *   dir/..2026_x/queries.yaml     the real file, in a timestamped directory
 *   dir/..data -> ..2026_x        swapped atomically (rename) on each update
 *   dir/queries.yaml -> ..data/queries.yaml
 */
const V1 = 'queries:\n  extra: {sql: SELECT 1 AS value}\n  gone: {sql: SELECT 2 AS value}\n';
const V2 = 'queries:\n  extra: {sql: SELECT 3 AS value}\n  added: {sql: SELECT 4 AS value}\n';
const BAD = 'queries:\n  extra: {sql: SELECT 1, clamp_min: 5, clamp_max: 1}\n';

class ConfigMapDir {
  private generation = 0;
  readonly dir = mkdtempSync(join(tmpdir(), 'dfe-configmap-'));
  readonly path = join(this.dir, 'queries.yaml');

  constructor(text: string) {
    this.publish(text);
    symlinkSync('..data/queries.yaml', this.path);
  }

  /** What the kubelet does: write a new timestamped dir, then atomically repoint ..data. */
  publish(text: string): void {
    const version = `..2026_${++this.generation}`;
    mkdirSync(join(this.dir, version));
    writeFileSync(join(this.dir, version, 'queries.yaml'), text);
    symlinkSync(version, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }

  removeFile(): void {
    unlinkSync(this.path);
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls (bounded) until an event arrives; no timing assertion. */
async function nextEvent(events: CatalogueEvent[], count: number, timeoutMs = 15_000): Promise<CatalogueEvent> {
  const until = Date.now() + timeoutMs;
  while (events.length < count) {
    if (Date.now() > until) throw new Error(`no catalogue event #${count} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return events[count - 1]!;
}

let cm: ConfigMapDir;
let store: CatalogueStore;
let events: CatalogueEvent[];

async function open(reloadIntervalMs = 60_000): Promise<void> {
  store = await CatalogueStore.open({ overridePath: cm.path, dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS, clock: new ManualClock(1), reloadIntervalMs });
  events = [];
  store.subscribe((e) => events.push(e));
}

beforeEach(() => {
  cm = new ConfigMapDir(V1);
});
afterEach(() => {
  store?.stop();
  cm.cleanup();
});

const names = () => [...store.current().queries.keys()];

describe('CatalogueStore.reload()', () => {
  it('nothing changed → unchanged, no event', async () => {
    await open();
    expect([await store.reload(), events.length]).toEqual(['unchanged', 0]);
  });

  it('a valid change is applied: changed = new or different, removed = gone', async () => {
    await open();
    cm.publish(V2);
    const result = await store.reload();
    const event = events[0];
    expect({ result, names: names(), event: event?.kind === 'applied' ? { changed: event.changed, removed: event.removed } : event }).toEqual({
      result: 'applied',
      names: ['backlog', 'pressure', 'extra', 'added'],
      event: { changed: ['extra', 'added'], removed: ['gone'] },
    });
  });

  it('an invalid change is rejected and the old catalogue keeps serving', async () => {
    await open();
    const before = store.current();
    cm.publish(BAD);
    const result = await store.reload();
    const event = events[0];
    expect({ result, same: store.current() === before, kind: event?.kind, error: event?.kind === 'rejected' ? event.error.message : '' }).toEqual({
      result: 'rejected',
      same: true,
      kind: 'rejected',
      error: `${cm.path}: query "extra" key "clamp_min": 5 is greater than clamp_max 1`,
    });
  });

  it('invalid YAML is rejected', async () => {
    await open();
    cm.publish('queries: [\n');
    expect([await store.reload(), events[0]?.kind]).toEqual(['rejected', 'rejected']);
  });

  it('a removed file is rejected (CATALOGUE_MISSING) and the old catalogue keeps serving', async () => {
    await open();
    const before = store.current();
    cm.removeFile();
    const result = await store.reload();
    const event = events[0];
    expect({ result, same: store.current() === before, file: event?.kind === 'rejected' ? event.file : '', code: event?.kind === 'rejected' ? (event.error as { code?: string }).code : '' }).toEqual({
      result: 'rejected',
      same: true,
      file: cm.path,
      code: 'CATALOGUE_MISSING',
    });
  });

  it('a good file after a bad one is applied', async () => {
    await open();
    cm.publish(BAD);
    await store.reload();
    cm.publish(V2);
    expect([await store.reload(), names()]).toEqual(['applied', ['backlog', 'pressure', 'extra', 'added']]);
  });

  it('concurrent reloads are serialized: one applies, the next sees no change', async () => {
    await open();
    cm.publish(V2);
    const results = await Promise.all([store.reload(), store.reload(), store.reload()]);
    expect([results, events.map((e) => e.kind)]).toEqual([['applied', 'unchanged', 'unchanged'], ['applied']]);
  });

  it('a failing listener does not stop the reload or the other listeners', async () => {
    await open();
    store.subscribe(() => {
      throw new Error('boom');
    });
    cm.publish(V2);
    expect([await store.reload(), events.length]).toEqual(['applied', 1]);
  });

  it('unsubscribe stops events', async () => {
    await open();
    const seen: CatalogueEvent[] = [];
    store.subscribe((e) => seen.push(e))();
    cm.publish(V2);
    await store.reload();
    expect(seen).toEqual([]);
  });
});

describe('CatalogueStore.start(): the swap is noticed without an explicit reload', () => {
  it('by the directory watch (interval effectively off)', async () => {
    await open(3_600_000);
    store.start();
    cm.publish(V2);
    const event = await nextEvent(events, 1);
    expect([event.kind, names()]).toEqual(['applied', ['backlog', 'pressure', 'extra', 'added']]);
  });

  it('by the content-hash interval', async () => {
    await open(50);
    store.start();
    cm.publish(V2);
    expect((await nextEvent(events, 1)).kind).toBe('applied');
  });

  it('a bad swap is rejected once, then a good one applies', async () => {
    await open(50);
    store.start();
    cm.publish(BAD);
    const rejected = await nextEvent(events, 1);
    cm.publish(V2);
    const applied = await nextEvent(events, 2);
    expect([rejected.kind, applied.kind, names()]).toEqual(['rejected', 'applied', ['backlog', 'pressure', 'extra', 'added']]);
  });
});
