import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { candidateOffsets, circularDistance, maxStepSeconds } from '../../../src/smoothing/candidates.js';
import { buildCurve } from '../../../src/smoothing/curve.js';
import type { CooldownState, HuntLoad, LoadCurve, PlannerSettings } from '../../../src/smoothing/model.js';
import { planCycle, planCycles } from '../../../src/smoothing/planner.js';
import { fleetArb, settingsArb, SMALL_FLEET_SETTINGS } from '../../helpers/fleet-arb.js';

const defaults: PlannerSettings = SMALL_FLEET_SETTINGS;
// Each fire: 30e6 µs of a 30e6 µs bucket and 100 of 200 bytes → P = 0.5·1 + 0.5·0.5 = 0.75.
const pulse = { durationMs: 10_000, cpuUs: 30e6, memoryBytes: 100 };
const at = (huntId: string, offsetSeconds: number, movable = true): HuntLoad => ({ huntId, periodSeconds: 120, offsetSeconds, movable, cost: pulse });

describe('planCycle, by hand', () => {
  it('moves one hunt off the peak by the shortest bucket-aligned step', () => {
    // P = [1.5, 0, 0.75, 0], J = 2.25 + 0.5625 = 2.8125. a and b tie on the marginal term; a
    // (first) may move ±30 s: to 90 (bucket 3) or 30 (bucket 1), equal J, equal distance → 30.
    const result = planCycle([at('a', 0), at('b', 0), at('c', 60)], defaults, 1, new Map());
    expect(result.move).toEqual({ cycle: 1, huntId: 'a', from: 0, to: 30 });
    expect(result.objective).toBeCloseTo(3 * 0.5625, 12); // P = [0.75, 0.75, 0.75, 0]
    expect(result.hunts.map((h) => h.offsetSeconds)).toEqual([30, 0, 60]);
    expect([...result.cooldown]).toEqual([['a', 1]]);
  });

  it('tries the next-highest bucket when the peak has no move', () => {
    // Three pinned hunts make the peak, bucket 0 (P 2.25); d and f pile up in bucket 2 (P 1.5).
    // Nothing in the peak may move, so bucket 2 is tried: d (first of a tie) moves to 30
    // (bucket 1) rather than 90 (bucket 3): equal J and distance, lower offset.
    // J: 2.25² + 1.5² = 7.3125 → 2.25² + 0.75² + 0.75² = 6.1875.
    const pinned = [at('b', 0, false), at('c', 0, false), at('e', 0, false)];
    const moved = planCycle([...pinned, at('d', 60), at('f', 60)], defaults, 1, new Map());
    expect(moved.move).toEqual({ cycle: 1, huntId: 'd', from: 60, to: 30 });
    expect(moved.objective).toBeCloseTo(6.1875, 12);
    // A lone movable hunt next to the pinned peak gains nothing by moving: no move.
    expect(planCycle([...pinned, at('d', 60)], defaults, 1, new Map()).move).toBeNull();
  });

  it('ranks the hunts of the peak by their share of the peak, not by their term in the whole of J', () => {
    // H 120 s, B 4, memory 0 so P = 0.5 × CPU / 30e6. L (T 120, P 0.5) and S (T 60, P 0.4,
    // fires at 0 and 60) share the peak, bucket 0 (P 0.9); pinned x puts 0.4 in bucket 2, so
    // P = [0.9, 0, 0.8, 0]. S's term in J (0.56 + 0.48) beats L's (0.65), but L lifts the peak
    // more (0.5 against 0.4), so L moves: ±30 s to 30 or 90 (bucket 1 or 3), equal J → 30.
    const cost = (pressure: number): HuntLoad['cost'] => ({ durationMs: 10_000, cpuUs: pressure * 60e6, memoryBytes: 0 });
    const hunts: HuntLoad[] = [
      { huntId: 'S', periodSeconds: 60, offsetSeconds: 0, movable: true, cost: cost(0.4) },
      { huntId: 'L', periodSeconds: 120, offsetSeconds: 0, movable: true, cost: cost(0.5) },
      { huntId: 'x', periodSeconds: 120, offsetSeconds: 60, movable: false, cost: cost(0.4) },
    ];
    expect([...buildCurve(hunts, defaults).pressure].map((p) => Number(p.toFixed(9)))).toEqual([0.9, 0, 0.8, 0]);
    expect(planCycle(hunts, defaults, 1, new Map()).move).toEqual({ cycle: 1, huntId: 'L', from: 0, to: 30 });
  });

  it('planCycles does not stop while a hunt whose cool-down is ending still has a move', () => {
    // T 240 (B 8), max_step 30 s: one bucket per move. a (0.75) shares bucket 0 with pinned p;
    // pinned 0.5s sit in buckets 1 and 7. Cycle 1: a → 30 (bucket 1; tie with 210, lower offset).
    // Cycles 2–4 it cools down and nothing else may move; cycle 5 it moves on to 60 (bucket 2, empty).
    const s = { ...defaults, maxStepFraction: 0.125 };
    const half = { durationMs: 10_000, cpuUs: 30e6, memoryBytes: 0 };
    const hunts: HuntLoad[] = [
      { huntId: 'a', periodSeconds: 240, offsetSeconds: 0, movable: true, cost: pulse },
      { huntId: 'p', periodSeconds: 240, offsetSeconds: 0, movable: false, cost: pulse },
      { huntId: 'q', periodSeconds: 240, offsetSeconds: 30, movable: false, cost: half },
      { huntId: 'r', periodSeconds: 240, offsetSeconds: 210, movable: false, cost: half },
    ];
    const plan = planCycles(hunts, s, 50);
    expect(plan.moves).toEqual([
      { cycle: 1, huntId: 'a', from: 0, to: 30 },
      { cycle: 5, huntId: 'a', from: 30, to: 60 },
    ]);
    expect(plan.objectiveByCycle.length).toBeLessThan(50); // and then it converges
  });

  it('never moves a hunt that would push a bucket over the memory cap', () => {
    // Cap 150: bucket 0 holds 200 (already over). Moving a to bucket 1 or 3 would put 100 +
    // 100 = 200 there (pinned x and y), over the cap; so nothing moves.
    const s = { ...defaults, memoryCapBytes: 150 };
    const result = planCycle([at('a', 0), at('b', 0), at('x', 30, false), at('y', 90, false)], s, 1, new Map());
    expect(result.move).toBeNull();
  });

  it('honours the cool-down', () => {
    const hunts = [at('a', 0), at('b', 0), at('c', 60)];
    expect(planCycle(hunts, defaults, 4, new Map([['a', 1]])).move?.huntId).toBe('b');
    expect(planCycle(hunts, defaults, 5, new Map([['a', 1]])).move?.huntId).toBe('a');
  });
});

const sum = (values: Float64Array): number => values.reduce((a, b) => a + b, 0);

/**
 * J_i = Σ_b 2·P(b)·p_i(b), recomputed from buildCurve: p_i is the curve of hunt i among
 * zero-cost copies of the others (so the hyperperiod, and the buckets, stay the fleet's).
 */
function partOfJ(hunts: readonly HuntLoad[], huntId: string, settings: PlannerSettings, curve: LoadCurve): number {
  const none = { durationMs: 0, cpuUs: 0, memoryBytes: 0 };
  const alone = buildCurve(hunts.map((h) => (h.huntId === huntId ? h : { ...h, cost: none })), settings).pressure;
  return alone.reduce((part, p, b) => part + 2 * (curve.pressure[b] ?? 0) * p, 0);
}

describe("the hysteresis, relative to the moved hunt's own part of J", () => {
  // T 120 s, B 4, memory 0: P = 0.5 × CPU / 30e6. A pinned floor of 100 hunts of 0.1 in each
  // bucket (P 10), `extra` more pinned ones in bucket 0, and one movable hunt a of 0.05 there.
  const cost = (pressure: number): HuntLoad['cost'] => ({ durationMs: 10_000, cpuUs: pressure * 60e6, memoryBytes: 0 });
  const fleet = (extra: number): HuntLoad[] => [
    ...Array.from({ length: 400 + extra }, (_, k): HuntLoad => ({
      huntId: `pinned-${k}`,
      periodSeconds: 120,
      offsetSeconds: k < 400 ? 30 * (k % 4) : 0,
      movable: false,
      cost: cost(0.1),
    })),
    { huntId: 'a', periodSeconds: 120, offsetSeconds: 0, movable: true, cost: cost(0.05) },
  ];

  it('commits, in a fleet of 421 hunts, a move the whole-J rule refused', () => {
    // P = [12.05, 10, 10, 10], J = 445.2025. a → bucket 1 (30 s; tie with 90, lower offset):
    // J falls by 12.05² + 10² − 12² − 10.05² = 0.2, under 0.001 × J = 0.445 (the old rule's
    // margin at its default), but over 0.1 × J_a = 0.1 × 2 × 12.05 × 0.05 = 0.1205.
    const hunts = fleet(20);
    const before = buildCurve(hunts, defaults);
    expect(before.objective).toBeCloseTo(445.2025, 9);
    expect(partOfJ(hunts, 'a', defaults, before)).toBeCloseTo(1.205, 9);
    const result = planCycle(hunts, defaults, 1, new Map());
    expect(result.move).toEqual({ cycle: 1, huntId: 'a', from: 0, to: 30 });
    const fall = before.objective - result.objective;
    expect(fall).toBeCloseTo(0.2, 9);
    expect(fall).toBeLessThan(0.001 * before.objective);
    expect(fall).toBeGreaterThan(defaults.hysteresis * 1.205);
  });

  it("refuses a move whose gain is small beside the hunt's own part of J, and stays put", () => {
    // P = [10.55, 10, 10, 10]: moving a gains 10.55² + 10² − 10.5² − 10.05² = 0.05, under
    // 0.1 × J_a = 0.1 × 2 × 10.55 × 0.05 = 0.1055. A real gain (with no hysteresis a moves),
    // but noise next to what a itself weighs: nothing moves, on this cycle or the next.
    const hunts = fleet(5);
    expect(partOfJ(hunts, 'a', defaults, buildCurve(hunts, defaults))).toBeCloseTo(1.055, 9);
    const first = planCycle(hunts, defaults, 1, new Map());
    expect(first.move).toBeNull();
    expect(planCycle(first.hunts, defaults, 2, first.cooldown).move).toBeNull();
    expect(planCycle(hunts, { ...defaults, hysteresis: 0 }, 1, new Map()).move).toEqual({ cycle: 1, huntId: 'a', from: 0, to: 30 });
  });

  it('a 600-hunt fleet settles flat at the default, stays settled, with fewer moves than at zero', () => {
    // Periods 300/900/3600 s, offsets and costs from a fixed LCG: deterministic.
    let seed = 7;
    const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const periods = [300, 900, 3600];
    const hunts = Array.from({ length: 600 }, (_, i): HuntLoad => {
      const periodSeconds = periods[Math.floor(random() * periods.length)] as number;
      const durationMs = 1_000 + Math.floor(random() * 40_000);
      return {
        huntId: `h${i}`,
        periodSeconds,
        offsetSeconds: Math.floor(random() * periodSeconds * 0.8),
        movable: true,
        cost: { durationMs, cpuUs: durationMs * 1_000 * (0.5 + random()), memoryBytes: Math.floor(1e6 * (0.2 + random())) },
      };
    });
    const settings: PlannerSettings = { ...defaults, cpuCores: 8, memoryCapBytes: 1e12 };
    const plan = planCycles(hunts, settings, 5_000);
    expect(plan.objectiveByCycle.length).toBeLessThan(5_000); // converged
    expect(plan.before.flatness).toBeGreaterThan(1.3);
    expect(plan.after.flatness).toBeLessThanOrEqual(1.2);
    // Settled: two more cycles, every hunt out of its cool-down, move nothing.
    const next = planCycle(plan.hunts, settings, 10_000, new Map());
    expect(next.move).toBeNull();
    expect(planCycle(next.hunts, settings, 10_001, next.cooldown).move).toBeNull();
    // The hysteresis still holds back the moves worth little: without it the fleet moves more.
    expect(planCycles(hunts, { ...settings, hysteresis: 0 }, 5_000).moves.length).toBeGreaterThan(plan.moves.length);
  });
});

describe('planCycle, properties', () => {
  let movesSeen = 0;
  afterAll(() => expect(movesSeen).toBeGreaterThan(50)); // the properties were exercised by real moves

  it('one hunt per cycle, within max_step, J never rises, load kept, memory cap, cool-down, pins', () => {
    fc.assert(
      fc.property(fleetArb, settingsArb, fc.integer({ min: 1, max: 12 }), (fleet, settings, cycles) => {
        let hunts: readonly HuntLoad[] = fleet;
        let cooldown: CooldownState = new Map();
        let curve: LoadCurve = buildCurve(hunts, settings);
        const first = curve;
        const lastMove = new Map<string, number>();
        for (let cycle = 1; cycle <= cycles; cycle++) {
          const result = planCycle(hunts, settings, cycle, cooldown);
          const next = buildCurve(result.hunts, settings);
          const changed = result.hunts.filter((h, i) => h.offsetSeconds !== hunts[i]?.offsetSeconds);
          expect(changed.length).toBe(result.move === null ? 0 : 1);
          expect(next.objective).toBeLessThanOrEqual(curve.objective * (1 + 1e-9) + 1e-12);
          expect(sum(next.cpu)).toBeCloseTo(sum(first.cpu), 0);
          expect(sum(next.mem)).toBe(sum(first.mem));
          for (let b = 0; b < next.buckets; b++) {
            expect(next.mem[b] ?? 0).toBeLessThanOrEqual(Math.max(settings.memoryCapBytes, curve.mem[b] ?? 0));
          }
          if (result.move !== null) {
            const { huntId, from, to } = result.move;
            const before = hunts.find((h) => h.huntId === huntId) as HuntLoad;
            expect(before.movable).toBe(true);
            expect(before.offsetSeconds).toBe(from);
            expect(changed[0]).toMatchObject({ huntId, offsetSeconds: to });
            expect(to).toBeGreaterThanOrEqual(0);
            expect(to).toBeLessThan(before.periodSeconds);
            const distance = circularDistance(from, to, before.periodSeconds);
            expect(distance).toBeGreaterThan(0);
            expect(distance).toBeLessThanOrEqual(maxStepSeconds(before.periodSeconds, settings.maxStepFraction));
            const previous = lastMove.get(huntId);
            if (previous !== undefined) expect(cycle - previous).toBeGreaterThan(settings.cooldownCycles);
            // The fall clears hysteresis × the hunt's own part of J (as the curve was before it).
            const fall = curve.objective - next.objective;
            expect(fall).toBeGreaterThan(settings.hysteresis * partOfJ(hunts, huntId, settings, curve) - 1e-9 * curve.objective);
            lastMove.set(huntId, cycle);
            movesSeen++;
          }
          hunts = result.hunts;
          cooldown = result.cooldown;
          curve = next;
        }
      }),
      // 400: at 150 a run saw 42–93 moves (mean ~64), under the guard's 50 one time in three.
      { numRuns: 400 },
    );
  });

  it('planCycles: J by cycle never rises, after = buildCurve(final offsets), moves consistent', () => {
    fc.assert(
      fc.property(fleetArb, settingsArb, fc.integer({ min: 1, max: 30 }), (fleet, settings, cycles) => {
        const result = planCycles(fleet, settings, cycles);
        expect(result.objectiveByCycle.length).toBeLessThanOrEqual(cycles);
        for (let i = 1; i < result.objectiveByCycle.length; i++) {
          expect(result.objectiveByCycle[i]).toBeLessThanOrEqual((result.objectiveByCycle[i - 1] as number) * (1 + 1e-9) + 1e-12);
        }
        expect(result.after.objective).toBeLessThanOrEqual(result.before.objective * (1 + 1e-9) + 1e-12);
        expect(result.after.flatness).toBe(buildCurve(result.hunts, settings).flatness);
        const offsets = new Map(fleet.map((h) => [h.huntId, h.offsetSeconds]));
        for (const move of result.moves) {
          expect(offsets.get(move.huntId)).toBe(move.from);
          offsets.set(move.huntId, move.to);
        }
        for (const h of result.hunts) expect(h.offsetSeconds).toBe(offsets.get(h.huntId));
        for (const h of fleet) if (!h.movable) expect(result.moves.some((m) => m.huntId === h.huntId)).toBe(false);
        // Stopping early means converged: with every hunt out of its cool-down, no move is left.
        if (result.objectiveByCycle.length < cycles) expect(planCycle(result.hunts, settings, 1, new Map()).move).toBeNull();
      }),
      { numRuns: 150 },
    );
  });
});

describe('candidate offsets', () => {
  it('one per bucket of drift for periods that are multiples of Δ', () => {
    // T 3600, max_step 900, Δ 30, φ 1339: window [439, 2239]; run starts 439 (cut by the window),
    // 450, 480, …, 2220 except 1320 (the run holding 1339).
    const got = candidateOffsets(1339, 3600, 900, 30, 3600);
    expect(got[0]).toBe(439);
    expect(got).toContain(450);
    expect(got).toContain(2220);
    expect(got).not.toContain(1320);
    expect(got.length).toBe(1 + (2220 - 450) / 30 + 1 - 1);
  });

  it('a capped hyperperiod: the offset where a fire drops off the end is a candidate', () => {
    // H = 604 800 (lcm(604 800, 11) is larger). T 11 has 54 982 fires from φ 0..9 and 54 981
    // from φ 10 (604 800 mod 11 = 10), so φ 10 is a breakpoint of its own.
    expect(candidateOffsets(0, 11, 5, 30, 604_800)).toContain(10);
    const settings = { ...defaults, memoryCapBytes: 1e9 };
    const week: HuntLoad = { huntId: 'week', periodSeconds: 604_800, offsetSeconds: 0, movable: false, cost: { durationMs: 0, cpuUs: 1e9, memoryBytes: 0 } };
    const odd: HuntLoad = { huntId: 'odd', periodSeconds: 11, offsetSeconds: 3, movable: true, cost: { durationMs: 0, cpuUs: 1e6, memoryBytes: 0 } };
    const jAt = (o: number): number => buildCurve([week, { ...odd, offsetSeconds: o }], settings).objective;
    const everySecond = Math.min(...Array.from({ length: 11 }, (_, o) => jAt(o)));
    const candidates = candidateOffsets(3, 11, 5, 30, 604_800);
    expect(Math.min(jAt(3), ...candidates.map(jAt))).toBeCloseTo(everySecond, 9);
  });

  it('reach the same best J as trying every second in the window', () => {
    fc.assert(
      fc.property(fleetArb, settingsArb, (fleet, settings) => {
        const curve = buildCurve(fleet, settings);
        const i = 0;
        const hunt = fleet[i] as HuntLoad;
        const step = maxStepSeconds(hunt.periodSeconds, settings.maxStepFraction);
        const jAt = (offset: number): number =>
          buildCurve(fleet.map((h, k) => (k === i ? { ...h, offsetSeconds: offset } : h)), settings).objective;
        let everySecond = curve.objective;
        for (let o = 0; o < hunt.periodSeconds; o++) {
          if (circularDistance(o, hunt.offsetSeconds, hunt.periodSeconds) <= step) everySecond = Math.min(everySecond, jAt(o));
        }
        const candidates = candidateOffsets(hunt.offsetSeconds, hunt.periodSeconds, step, settings.bucketSeconds, curve.hyperperiodSeconds);
        for (const o of candidates) expect(circularDistance(o, hunt.offsetSeconds, hunt.periodSeconds)).toBeLessThanOrEqual(step);
        const best = Math.min(curve.objective, ...candidates.map(jAt));
        expect(best).toBeCloseTo(everySecond, 9);
      }),
      { numRuns: 60 },
    );
  });
});
