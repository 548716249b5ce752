import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeKeeperMap, readClaimMode, resolveClaimMode } from '../../src/coordination/claims/mode.js';
import { applySchema } from '../../src/coordination/topology.js';
import { DfeError } from '../../src/errors.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * The claim-mode choice (docs/claim-protocol.md#choosing-the-mode) on a target WITHOUT
 * KeeperMap: the test engine as configured (the embedded engine without a config file, or
 * a server without keeper_map_path_prefix). keeper-claims.test.ts covers the target with it.
 */
let db: TestDatabase;
const single = { kind: 'single' } as const;

beforeAll(async () => {
  db = await openTestDatabase('claimmode');
  await applySchema(db.handle.client, db.database, single);
});
afterAll(async () => db?.close());

describe('claim mode without KeeperMap', () => {
  it('the probe says tables, with the reason', async () => {
    const probe = await probeKeeperMap(db.handle.client, db.database, single);
    expect(probe.mode).toBe('tables');
    expect(probe.reason).toMatch(/keeper|zookeeper/i);
  });

  it('auto probes once and records tables; later runners follow the record', async () => {
    expect(await readClaimMode(db.handle.client, db.database)).toBeUndefined();
    expect(await resolveClaimMode(db.handle.client, db.database, single, 'auto')).toEqual({ mode: 'tables', source: 'probed' });
    expect(await readClaimMode(db.handle.client, db.database)).toBe('tables');
    expect(await resolveClaimMode(db.handle.client, db.database, single, 'auto')).toEqual({ mode: 'tables', source: 'recorded' });
  });

  it('DFE_COORDINATION_CLAIMS=keeper here is a configuration error naming the setting', async () => {
    const err = await resolveClaimMode(db.handle.client, db.database, single, 'keeper').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DfeError);
    expect((err as DfeError).code).toBe('CONFIG_INVALID');
    expect((err as DfeError).key).toBe('DFE_COORDINATION_CLAIMS');
    expect((err as Error).message).toMatch(/^invalid DFE_COORDINATION_CLAIMS="keeper": KeeperMap does not work on this ClickHouse/);
  });
});
