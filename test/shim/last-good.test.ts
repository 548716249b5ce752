import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse } from '../../src/clickhouse/client.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import { PeerTargets } from '../../src/shim/last-good/peer-targets.js';
import { decodeSnapshot, encodeSnapshot } from '../../src/shim/last-good/snapshot-format.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { blackHoleServer, refusedPort } from '../helpers/faults.js';
import { freePort } from '../helpers/ports.js';
import { capturingLogger } from '../helpers/logger.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * The last-good cache's snapshot on disk and the internal route peers ask
 * (docs/failsafe.md#snapshot-and-peers), on the embedded engine. The peer
 * lookup itself between processes: test/chaos/replicas.test.ts.
 */
let db: TestDatabase;
const dir = mkdtempSync(join(tmpdir(), 'dfe-last-good-'));
const apps: AppUnderTest[] = [];
// fresh_for keeps a restored value served from the cache: no ClickHouse query decides the answer.
const one = compiled('one', 'SELECT 7', { freshForSeconds: 3600 });

beforeAll(async () => {
  db = await openTestDatabase('shim_last_good');
});
afterAll(async () => {
  for (const t of apps) await t.app.close();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function appWith(env: Record<string, string>, clock: ManualClock, queries = [one], logger = silentLogger()): Promise<AppUnderTest> {
  const t = await makeApp({ queries, clickhouse: db.handle, env, clock, logger });
  apps.push(t);
  return t;
}

describe('snapshot', () => {
  it('written at close, read at start: the restarted app serves the value with its original age, without asking ClickHouse', async () => {
    const snapshotDir = join(dir, 'restart');
    const clock = new ManualClock(1_000_000);
    const first = await appWith({ DFE_KEDA_SHIM_SNAPSHOT_DIR: snapshotDir, DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS: '3600000' }, clock);
    expect((await get(first.app, '/q/one')).body).toEqual({ value: 7, source: 'fresh', age_seconds: 0 });
    await first.app.close();
    expect(decodeSnapshot(readFileSync(join(snapshotDir, 'last-good.json'), 'utf8'))).toHaveLength(1);

    clock.advance(5_000);
    const second = await appWith({ DFE_KEDA_SHIM_SNAPSHOT_DIR: snapshotDir }, clock);
    expect((await get(second.app, '/q/one')).body).toEqual({ value: 7, source: 'fresh', age_seconds: 5 });
    expect(second.app.shim.executor.queriesStarted).toBe(0);
  });

  it('drops entries of a query that changed or went, keeps the rest', async () => {
    const snapshotDir = join(dir, 'changed');
    const clock = new ManualClock(1_000_000);
    const two = compiled('two', 'SELECT 2', { freshForSeconds: 3600 });
    const gone = compiled('gone', 'SELECT 3', { freshForSeconds: 3600 });
    const first = await appWith({ DFE_KEDA_SHIM_SNAPSHOT_DIR: snapshotDir }, clock, [one, two, gone]);
    for (const name of ['one', 'two', 'gone']) expect((await get(first.app, `/q/${name}`)).status).toBe(200);
    await first.app.close();

    const { logger, lines } = capturingLogger();
    const changedTwo = compiled('two', 'SELECT 22', { freshForSeconds: 3600 });
    const second = await appWith({ DFE_KEDA_SHIM_SNAPSHOT_DIR: snapshotDir }, clock, [one, changedTwo], logger);
    expect(lines.find((l) => l.msg === 'last-good snapshot restored')).toMatchObject({ restored: 1, droppedGone: 1, droppedChanged: 1 });
    expect((await get(second.app, '/q/one')).body.value).toBe(7);
    expect(second.app.shim.executor.queriesStarted).toBe(0);
    expect((await get(second.app, '/q/two')).body.value).toBe(22);
    expect(second.app.shim.executor.queriesStarted).toBe(1);
  });

  it('a corrupt or wrong-shaped snapshot is logged with its file name and ignored; the app serves', async () => {
    for (const [name, text] of [
      ['not-json', '{"version":1,"entr'],
      ['wrong-shape', JSON.stringify({ version: 1, written_at_ms: 1, entries: [['k', 'one', 'fp', 'seven', 1]] })],
      ['other-version', JSON.stringify({ version: 99, written_at_ms: 1, entries: [] })],
    ] as const) {
      const snapshotDir = join(dir, name);
      const file = join(snapshotDir, 'last-good.json');
      mkdirSync(snapshotDir, { recursive: true });
      writeFileSync(file, text);
      const { logger, lines } = capturingLogger();
      const t = await appWith({ DFE_KEDA_SHIM_SNAPSHOT_DIR: snapshotDir }, new ManualClock(1_000), [one], logger);
      expect(lines.find((l) => l.file === file && String(l.msg).includes('snapshot is corrupt'))).toBeDefined();
      expect((await get(t.app, '/q/one')).body).toEqual({ value: 7, source: 'fresh', age_seconds: 0 });
    }
  });

  it('encode/decode keep key, query, fingerprint, value and the original time', () => {
    const text = encodeSnapshot([['k', { query: 'q', fingerprint: 'f', value: 1.5, atMs: 42 }]], 100);
    expect(decodeSnapshot(text)).toEqual([{ key: 'k', entry: { query: 'q', fingerprint: 'f', value: 1.5, atMs: 42 } }]);
  });
});

describe('GET /internal/last-good', () => {
  it('answers from the cache only: the entry and its age, 404 for an unknown key or another definition, never a ClickHouse query', async () => {
    const clock = new ManualClock(1_000_000);
    const t = await appWith({}, clock);
    const key = JSON.stringify(['one', []]);
    const url = (fingerprint: string, k = key) => `/internal/last-good?${new URLSearchParams({ query: 'one', fingerprint, key: k }).toString()}`;
    expect((await get(t.app, url(one.fingerprint))).status).toBe(404);
    expect(t.app.shim.executor.queriesStarted).toBe(0);
    await get(t.app, '/q/one');
    clock.advance(2_500);
    expect(await get(t.app, url(one.fingerprint))).toMatchObject({ status: 200, body: { value: 7, age_seconds: 2.5 } });
    expect((await get(t.app, url('another-definition'))).status).toBe(404);
    expect((await get(t.app, url(one.fingerprint, JSON.stringify(['one', [['x', '1']]])))).status).toBe(404);
    expect((await get(t.app, '/internal/last-good?query=one')).status).toBe(400);
    expect(t.app.shim.executor.queriesStarted).toBe(1);
  });

  it('is guarded by the auth of the query routes', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'peer-token\n');
    const t = await appWith({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenFile }, new ManualClock(1));
    const url = `/internal/last-good?${new URLSearchParams({ query: 'one', fingerprint: one.fingerprint, key: JSON.stringify(['one', []])}).toString()}`;
    expect((await get(t.app, url)).status).toBe(401);
    expect((await get(t.app, url, { authorization: 'Bearer peer-token' })).status).toBe(404);
  });
});

describe('peer lookup between two listening apps', () => {
  it('a cold key on a failing ClickHouse gets the peer\'s value and age, with the auth credentials; a wrong secret counts an error and answers cold_hold', async () => {
    const tokenFile = join(dir, 'peer-token');
    writeFileSync(tokenFile, 'shared-token\n');
    const auth = { DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenFile };
    const clock = new ManualClock(1_000_000);
    const coldOne = compiled('one', 'SELECT 7', { coldHold: 3 });
    const portA = await freePort();
    const a = await appWith({ ...auth, DFE_KEDA_SHIM_PORT: String(portA) }, clock, [coldOne]);
    await a.app.listen({ host: '127.0.0.1', port: portA });
    expect((await get(a.app, '/q/one', { authorization: 'Bearer shared-token' })).body).toMatchObject({ value: 7, source: 'fresh' });
    clock.advance(4_000);

    const refused = await refusedPort();
    const failing = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: refused.url }).clickhouse);
    try {
      const makeB = async (tokenPath: string) => {
        const t = await makeApp({
          queries: [coldOne],
          clickhouse: failing,
          clock,
          env: { DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenPath, DFE_KEDA_SHIM_PEERS: `http://127.0.0.1:${portA}`, DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '5000' },
        });
        apps.push(t);
        return t;
      };
      const b = await makeB(tokenFile);
      expect((await get(b.app, '/q/one', { authorization: 'Bearer shared-token' })).body).toEqual({ value: 7, source: 'last_good', age_seconds: 4 });
      expect(await (await b.app.inject('/metrics')).body).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="found"\} 1/);

      const wrongToken = join(dir, 'wrong-token');
      writeFileSync(wrongToken, 'other-token\n');
      const c = await makeB(wrongToken);
      expect((await get(c.app, '/q/one', { authorization: 'Bearer other-token' })).body).toEqual({ value: 3, source: 'cold_hold', age_seconds: 0 });
      expect(await (await c.app.inject('/metrics')).body).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="error"\} 1/);
    } finally {
      await failing.close();
    }
  });
});

describe('peer lookup ahead of the deadline', () => {
  it('a hung ClickHouse that takes the whole deadline still leaves the peers time: last_good, not cold_hold', async () => {
    const clock = new ManualClock(1_000_000);
    // Generous times: the peer has 2 s to answer on a loaded machine.
    const slowCold = compiled('one', 'SELECT 7', { coldHold: 3, deadlineMs: 4_000, timeoutSeconds: 10 });
    const portA = await freePort();
    const a = await appWith({ DFE_KEDA_SHIM_PORT: String(portA) }, clock, [slowCold]);
    await a.app.listen({ host: '127.0.0.1', port: portA });
    expect((await get(a.app, '/q/one')).body).toMatchObject({ value: 7, source: 'fresh' });

    const hung = await blackHoleServer();
    const handle = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: hung.url }).clickhouse);
    try {
      const b = await makeApp({ queries: [slowCold], clickhouse: handle, clock, env: { DFE_KEDA_SHIM_PEERS: `http://127.0.0.1:${portA}`, DFE_KEDA_SHIM_PEER_TIMEOUT_MS: '2000' } });
      apps.push(b);
      expect((await get(b.app, '/q/one')).body).toEqual({ value: 7, source: 'last_good', age_seconds: 0 });
      expect(hung.hits()).toBeGreaterThan(0);
      expect(await (await b.app.inject('/metrics')).body).toMatch(/dfe_keda_shim_peer_lookups_total\{outcome="found"\} 1/);
    } finally {
      await handle.close();
      await hung.close();
    }
  });
});

describe('peer targets', () => {
  it('resolves each host to all its addresses and leaves this process out', async () => {
    const resolve = async (host: string) => (host === 'shim-peers' ? ['10.0.0.5', '10.0.0.6', '127.0.0.1'] : []);
    const targets = new PeerTargets(['http://shim-peers:8080', 'http://127.0.0.1:9000', 'http://nowhere:8080'], () => 8080, () => 0, 5_000, resolve);
    expect((await targets.current()).map((t) => t.base)).toEqual(['http://10.0.0.5:8080', 'http://10.0.0.6:8080', 'http://127.0.0.1:9000']);
  });
});
