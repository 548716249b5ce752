import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchema } from '../../src/coordination/topology.js';
import { dueCountSql, dueRowsSql, type DueRow } from '../../src/coordination/due-sql.js';
import { dueDecision, latestFire, phaseOffset } from '../../src/schedule/arithmetic.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';

/**
 * docs/tables.md#the-due-rule parity: the due SQL on a real engine counts exactly the hunts the
 * TypeScript predicate calls due, across ids × intervals × now around the fire
 * (both branches of the `if`) × watermarks × leases × auto-disable histories
 * (docs/tables.md) × run-now requests.
 */
const IDS = ['a', 'brute-force-ssh', 'post-1682300-71da5fa4', 'ünïcødé-hunt'];
const INTERVALS = [2, 3, 5, 60, 300, 900, 3600, 86400];
const BASE_NOW = 1_900_000_000;

type Watermark = 'none' | 'zero' | 'fire-1' | 'fire' | 'fire+1' | 'far';
type Lease = 'none' | 'now-1' | 'now' | 'now+1' | 'far';
/** hunt_state history, oldest first: '' = enabled row, anything else = disabled with that reason. */
type Disabled = 'none' | 'enabled' | 'disabled' | 're-enabled' | 'disabled-again';
/** A run-now request: none, one at now (open unless the watermark covers it), one in the future. */
type Request = 'none' | 'now' | 'future';
const WATERMARKS: Watermark[] = ['none', 'zero', 'fire-1', 'fire', 'fire+1', 'far'];
const LEASES: Lease[] = ['none', 'now-1', 'now', 'now+1', 'far'];
const DISABLED: Record<Disabled, readonly string[]> = {
  none: [],
  enabled: [''],
  disabled: ['memory_limit'],
  're-enabled': ['memory_limit', ''],
  'disabled-again': ['', 'memory_limit'],
};
const REQUESTS: Request[] = ['none', 'now', 'future'];

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
  readonly states: readonly string[];
  readonly requested: number | null;
}

let db: TestDatabase;

beforeAll(async () => {
  db = await openTestDatabase('parity');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
});
afterAll(async () => db?.close());

async function resetTables(): Promise<void> {
  for (const t of ['hunt_schedule', 'hunt_watermark', 'hunt_lease', 'hunt_run', 'hunt_state']) {
    await db.handle.client.command({ query: `TRUNCATE TABLE \`${db.database}\`.${t}` });
  }
}

describe('due SQL = due predicate (parity matrix)', () => {
  it('agrees on every (id, interval, now, watermark, lease, disabled, run-now) combination', async () => {
    let checked = 0;
    let dueSeen = 0;
    let requestedSeen = 0;
    let disabledHidden = 0;
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
              for (const [disabled, states] of Object.entries(DISABLED)) {
                for (const request of REQUESTS) {
                  const requested = { none: null, now, future: now + 1 }[request];
                  const huntId = `${id}|${interval}|${wm}|${lease}|${disabled}|${request}`;
                  cases.push({ huntId, interval, offset, watermark, leaseUntil, states, requested });
                }
              }
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
          const stateRows = cases.flatMap((k) =>
            // Versions one second apart, so the newest row is unambiguous.
            k.states.map((reason, i) => ({ hunt_id: k.huntId, overrun_count: 0, too_aggressive: 0, disabled_reason: reason, updated: BASE_NOW + i })),
          );
          if (stateRows.length) {
            await c.insert({ table: `${db.database}.hunt_state`, values: stateRows, format: 'JSONEachRow' });
          }
          const requests = cases.filter((k) => k.requested !== null);
          if (requests.length) {
            await c.insert({
              table: `${db.database}.hunt_run`,
              values: requests.map((k) => ({ hunt_id: k.huntId, fire: k.requested, status: 'requested', rows_written: 0 })),
              format: 'JSONEachRow',
            });
          }
          const rows = await queryRows<DueRow>(db, dueRowsSql(db.database, { now: 'param' }), { now });
          const sqlDue = new Map(rows.map((r) => [r.hunt_id, { fire: Number(r.fire), requested: Number(r.requested) === 1 }]));
          const [count] = await queryRows<{ value: string | number }>(db, dueCountSql(db.database, { now: 'param' }), { now });
          expect(Number(count?.value)).toBe(rows.length);
          for (const k of cases) {
            const state = {
              intervalSeconds: k.interval,
              phaseOffset: k.offset,
              watermark: k.watermark,
              leaseUntil: k.leaseUntil,
              requestedFires: k.requested === null ? [] : [k.requested],
              disabledReason: k.states.at(-1) ?? '',
            };
            const ts = dueDecision(state, now);
            if (sqlDue.has(k.huntId) !== ts.due) {
              expect({ id: k.huntId, now, due: sqlDue.has(k.huntId) }).toEqual({ id: k.huntId, now, due: ts.due });
            }
            if (ts.due) {
              expect({ id: k.huntId, now, ...sqlDue.get(k.huntId) }).toEqual({ id: k.huntId, now, fire: ts.fire, requested: ts.requested });
              dueSeen += 1;
              if (ts.requested) requestedSeen += 1;
            } else if (state.disabledReason && dueDecision({ ...state, disabledReason: '' }, now).due) {
              disabledHidden += 1;
            }
            checked += 1;
            branches[previous ? 'previous' : 'current'] += 1;
          }
        }
      }
    }
    // Both outcomes and both branches of the `if` must have been exercised.
    expect(checked).toBeGreaterThan(60_000);
    expect(dueSeen).toBeGreaterThan(3000);
    // Run-now fires, and disabled hunts that would otherwise be due, both occur.
    expect(requestedSeen).toBeGreaterThan(300);
    expect(disabledHidden).toBeGreaterThan(1000);
    expect(dueSeen).toBeLessThan(checked);
    expect(branches.previous).toBeGreaterThan(0);
    expect(branches.current).toBeGreaterThan(0);
    // ~160 rounds of inserts and two due queries each: about 25 s on a quiet
    // 2-core machine, several times that on a loaded one.
  }, 300_000);
});
