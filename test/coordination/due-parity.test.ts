import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchema } from '../../src/coordination/topology.js';
import { dueCountSql, dueRowsSql, type DueRow } from '../../src/coordination/due-sql.js';
import { dueDecision, latestFire, phaseOffset } from '../../src/schedule/arithmetic.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * docs/tables.md#the-due-rule parity: the due SQL on a real engine counts exactly the hunts the
 * TypeScript predicate calls due, across ids × intervals × now around the fire
 * (both branches of the `if`) × watermarks × leases.
 */
const IDS = ['a', 'brute-force-ssh', 'post-1682300-71da5fa4', 'ünïcødé-hunt'];
const INTERVALS = [2, 3, 5, 60, 300, 900, 3600, 86400];
const BASE_NOW = 1_900_000_000;

type Watermark = 'none' | 'zero' | 'fire-1' | 'fire' | 'fire+1' | 'far';
type Lease = 'none' | 'now-1' | 'now' | 'now+1' | 'far';
const WATERMARKS: Watermark[] = ['none', 'zero', 'fire-1', 'fire', 'fire+1', 'far'];
const LEASES: Lease[] = ['none', 'now-1', 'now', 'now+1', 'far'];

function nowsAround(interval: number, offset: number): number[] {
  // The fire of the interval containing BASE_NOW, then instants just before
  // (the "previous interval" branch), at, and after it.
  const boundary = Math.floor(BASE_NOW / interval) * interval;
  const fire = boundary + offset;
  const candidates = [fire - 1, fire, fire + 1, boundary, boundary + interval - 1];
  return [...new Set(candidates)].filter((n) => n >= boundary && n < boundary + interval);
}

interface Case {
  readonly huntId: string;
  readonly interval: number;
  readonly offset: number;
  readonly watermark: number | null;
  readonly leaseUntil: number | null;
}

let db: TestDatabase;

beforeAll(async () => {
  db = await openTestDatabase('parity');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterAll(async () => db?.close());

async function resetTables(): Promise<void> {
  for (const t of ['hunt_schedule', 'hunt_watermark', 'hunt_lease', 'hunt_run']) {
    await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.${t}` });
  }
}

describe('due SQL = due predicate (parity matrix)', () => {
  it('agrees on every (id, interval, now, watermark, lease) combination', async () => {
    let checked = 0;
    let dueSeen = 0;
    const branches = { previous: 0, current: 0 };
    for (const id of IDS) {
      for (const interval of INTERVALS) {
        const offset = phaseOffset(id, interval);
        for (const now of nowsAround(interval, offset)) {
          const fire = latestFire(now, interval, offset);
          const previous = now < Math.floor(now / interval) * interval + offset;
          const cases: Case[] = [];
          for (const wm of WATERMARKS) {
            for (const lease of LEASES) {
              const watermark = { none: null, zero: 0, 'fire-1': fire - 1, fire, 'fire+1': fire + 1, far: fire + 10 * interval + 10_000 }[wm];
              const leaseUntil = { none: null, 'now-1': now - 1, now, 'now+1': now + 1, far: now + 1_000_000 }[lease];
              cases.push({ huntId: `${id}|${interval}|${wm}|${lease}`, interval, offset, watermark, leaseUntil });
            }
          }
          await resetTables();
          const c = db.handle.client;
          await c.insert({
            table: `${db.database}.hunt_schedule`,
            values: cases.map((k) => ({ hunt_id: k.huntId, interval_seconds: k.interval, phase_offset: k.offset })),
            format: 'JSONEachRow',
          });
          const wms = cases.filter((k) => k.watermark !== null);
          if (wms.length) {
            await c.insert({
              table: `${db.database}.hunt_watermark`,
              values: wms.map((k) => ({ hunt_id: k.huntId, watermark: k.watermark })),
              format: 'JSONEachRow',
            });
          }
          const leases = cases.filter((k) => k.leaseUntil !== null);
          if (leases.length) {
            await c.insert({
              table: `${db.database}.hunt_lease`,
              values: leases.map((k) => ({ hunt_id: k.huntId, owner: 'o', fire, lease_until: k.leaseUntil })),
              format: 'JSONEachRow',
            });
          }
          const rows = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now });
          const sqlDue = new Map(rows.map((r) => [r.hunt_id, Number(r.fire)]));
          const [count] = await queryRows<{ value: string | number }>(db, dueCountSql(db.database, { now: 'param' }), { now });
          expect(Number(count?.value)).toBe(rows.length);
          for (const k of cases) {
            const ts = dueDecision({ intervalSeconds: k.interval, phaseOffset: k.offset, watermark: k.watermark, leaseUntil: k.leaseUntil }, now);
            expect({ id: k.huntId, now, due: sqlDue.has(k.huntId) }).toEqual({ id: k.huntId, now, due: ts.due });
            if (ts.due) {
              expect(sqlDue.get(k.huntId)).toBe(ts.fire);
              dueSeen += 1;
            }
            checked += 1;
            branches[previous ? 'previous' : 'current'] += 1;
          }
        }
      }
    }
    // Both outcomes and both branches of the `if` must have been exercised.
    expect(checked).toBeGreaterThan(3000);
    expect(dueSeen).toBeGreaterThan(300);
    expect(dueSeen).toBeLessThan(checked);
    expect(branches.previous).toBeGreaterThan(0);
    expect(branches.current).toBeGreaterThan(0);
  });
});
