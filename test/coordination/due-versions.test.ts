import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchema } from '../../src/coordination/topology.js';
import { dueCountSql, dueRowsSql, type DueRow } from '../../src/coordination/due-sql.js';
import { dueDecision, latestFire, type HuntCoordinationState } from '../../src/schedule/arithmetic.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * docs/tables.md#the-due-query: each coordination table holds several versions
 * of a hunt's row, in separate unmerged parts, and only the NEWEST counts — even
 * where an older row would make the hunt due and the newer one not, or the
 * other way round. The due SQL must agree with the predicate on the newest rows,
 * before and after the parts are merged.
 */
const NOW = 1_900_000_000;
/** Versions a day apart and recent: hunt_run's retention TTL drops rows older than 90 days. */
const dateTime64 = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
const OLD = dateTime64(Date.now() - 2 * 86_400_000);
const NEW = dateTime64(Date.now() - 86_400_000);

interface Version {
  readonly schedule?: { interval: number; offset: number; enabled?: number };
  readonly watermark?: number;
  readonly leaseUntil?: number;
  readonly disabledReason?: string;
}

interface Scenario {
  readonly id: string;
  readonly old: Version;
  readonly new: Version;
  readonly requested?: { fire: number; thenFailed: boolean };
}

const fire300 = latestFire(NOW, 300, 7);
const S = { interval: 300, offset: 7 };

const SCENARIOS: Scenario[] = [
  { id: 'tombstoned', old: { schedule: S }, new: { schedule: { interval: 0, offset: 0, enabled: 0 } } },
  { id: 'revived', old: { schedule: { interval: 0, offset: 0, enabled: 0 } }, new: { schedule: S } },
  { id: 'interval-changed', old: { schedule: { interval: 60, offset: 3 } }, new: { schedule: S } },
  { id: 'watermark-lowered', old: { schedule: S, watermark: fire300 }, new: { watermark: fire300 - 300 } },
  { id: 'watermark-raised', old: { schedule: S, watermark: fire300 - 300 }, new: { watermark: fire300 } },
  { id: 'lease-released', old: { schedule: S, leaseUntil: NOW + 300 }, new: { leaseUntil: 0 } },
  { id: 'lease-taken', old: { schedule: S, leaseUntil: 0 }, new: { leaseUntil: NOW + 300 } },
  { id: 'lease-expired-newer', old: { schedule: S, leaseUntil: NOW + 300 }, new: { leaseUntil: NOW - 1 } },
  { id: 're-enabled', old: { schedule: S, disabledReason: 'memory_limit' }, new: { disabledReason: '' } },
  { id: 'disabled', old: { schedule: S, disabledReason: '' }, new: { disabledReason: 'memory_limit' } },
  {
    id: 'request-failed',
    old: { schedule: S, watermark: fire300 },
    new: {},
    requested: { fire: NOW - 5, thenFailed: true },
  },
  { id: 'request-open', old: { schedule: S, watermark: fire300 }, new: {}, requested: { fire: NOW - 5, thenFailed: false } },
];

let db: TestDatabase;
beforeAll(async () => {
  db = await openTestDatabase('versions');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterAll(async () => db?.close());

/** Newest-row semantics written out by hand, the way the predicate sees a hunt. */
function newest(s: Scenario): HuntCoordinationState | null {
  const schedule = s.new.schedule ?? s.old.schedule;
  if (!schedule || schedule.enabled === 0 || schedule.interval === 0) return null;
  const pick = <K extends keyof Version>(k: K) => (s.new[k] !== undefined ? s.new[k] : s.old[k]);
  return {
    intervalSeconds: schedule.interval,
    phaseOffset: schedule.offset,
    watermark: pick('watermark') ?? null,
    leaseUntil: pick('leaseUntil') ?? null,
    disabledReason: pick('disabledReason') ?? '',
    requestedFires: s.requested ? [s.requested.fire] : [],
  };
}

async function insertVersion(version: 'old' | 'new'): Promise<void> {
  const c = db.handle.client;
  const updated = version === 'old' ? OLD : NEW;
  const rows = SCENARIOS.map((s) => ({ id: s.id, v: s[version] }));
  // One INSERT per table and version: separate parts, nothing merged yet.
  const schedule = rows.filter((r) => r.v.schedule);
  if (schedule.length) {
    await c.insert({
      table: `${db.database}.hunt_schedule`,
      values: schedule.map((r) => ({
        hunt_id: r.id,
        interval_seconds: r.v.schedule?.interval,
        phase_offset: r.v.schedule?.offset,
        enabled: r.v.schedule?.enabled ?? 1,
        updated,
      })),
      format: 'JSONEachRow',
    });
  }
  const wm = rows.filter((r) => r.v.watermark !== undefined);
  if (wm.length) {
    await c.insert({
      table: `${db.database}.hunt_watermark`,
      values: wm.map((r) => ({ hunt_id: r.id, watermark: r.v.watermark, updated })),
      format: 'JSONEachRow',
    });
  }
  const leases = rows.filter((r) => r.v.leaseUntil !== undefined);
  if (leases.length) {
    await c.insert({
      table: `${db.database}.hunt_lease`,
      values: leases.map((r) => ({ hunt_id: r.id, owner: 'o', fire: fire300, lease_until: r.v.leaseUntil, claimed: updated })),
      format: 'JSONEachRow',
    });
  }
  const states = rows.filter((r) => r.v.disabledReason !== undefined);
  if (states.length) {
    await c.insert({
      table: `${db.database}.hunt_state`,
      values: states.map((r) => ({ hunt_id: r.id, overrun_count: 0, too_aggressive: 0, disabled_reason: r.v.disabledReason, updated })),
      format: 'JSONEachRow',
    });
  }
  const runs = SCENARIOS.filter((s) => s.requested && (version === 'old' || s.requested.thenFailed));
  if (runs.length) {
    await c.insert({
      table: `${db.database}.hunt_run`,
      values: runs.map((s) => ({
        hunt_id: s.id,
        fire: s.requested?.fire,
        status: version === 'old' ? 'requested' : 'failed',
        rows_written: 0,
        updated,
      })),
      format: 'JSONEachRow',
    });
  }
}

async function sqlDue(): Promise<Record<string, { fire: number; requested: boolean }>> {
  const rows = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now: NOW });
  const [count] = await queryRows<{ value: string | number }>(db, dueCountSql(db.database, { now: 'param' }), { now: NOW });
  expect(Number(count?.value)).toBe(rows.length);
  return Object.fromEntries(rows.map((r) => [r.hunt_id, { fire: Number(r.fire), requested: Number(r.requested) === 1 }]));
}

function expected(): Record<string, { fire: number; requested: boolean }> {
  const out: Record<string, { fire: number; requested: boolean }> = {};
  for (const s of SCENARIOS) {
    const state = newest(s);
    const d = state ? dueDecision(state, NOW) : { due: false as const };
    if (d.due) out[s.id] = { fire: d.fire, requested: d.requested };
  }
  return out;
}

describe('due SQL reads only the newest version of each row', () => {
  it('agrees with the predicate on the newest rows, unmerged and after a merge', async () => {
    await insertVersion('old');
    await insertVersion('new');
    const want = expected();
    // The scenarios must exercise both outcomes, and run-now.
    expect(Object.keys(want).sort()).toEqual(
      ['interval-changed', 'lease-expired-newer', 'lease-released', 're-enabled', 'request-failed', 'request-open', 'revived', 'watermark-lowered'].sort(),
    );
    expect(want['request-failed']?.requested).toBe(true);
    expect(await sqlDue()).toEqual(want);
    for (const t of ['hunt_schedule', 'hunt_watermark', 'hunt_lease', 'hunt_state']) {
      await db.handle.client.command({ query: `OPTIMIZE TABLE \`${db.database}\`.${t} FINAL` });
    }
    expect(await sqlDue()).toEqual(want);
  });
});
