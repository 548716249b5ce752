import { cpuCapacityUs, depositAll, pressureOf, sumOfSquares } from './curve.js';
import type { CooldownState, HuntLoad, PlannerSettings } from './model.js';
import { assertCurveInput, geometry, pulseWidth, type Geometry } from './pulse.js';

/**
 * The planner's working copy of the curve, kept up to date move by move so that trying an
 * offset costs O(fires × d) (the buckets the hunt leaves and lands in), never O(B).
 * Hunt fields live in typed arrays: the hot loops touch numbers only. docs/smoothing.md
 * "Making a cycle cheap".
 */
export class CurveState {
  readonly g: Geometry;
  readonly hunts: HuntLoad[];
  readonly pressure: Float64Array;
  /** Hunts covering each bucket (by index into `hunts`). */
  readonly cover: Array<Set<number>>;
  readonly movable: Uint8Array;
  readonly period: Float64Array;
  objective = 0;
  private readonly cpu: Float64Array;
  private readonly mem: Float64Array;
  private readonly cpuCap: number;
  private readonly offset: Float64Array;
  private readonly width: Int32Array;
  private readonly cpuPer: Float64Array;
  private readonly memory: Float64Array;
  /** Pressure one covered bucket receives from the hunt. */
  private readonly unit: Float64Array;
  private readonly index: Map<string, number>;
  private readonly oldCount: Int32Array;
  private readonly newCount: Int32Array;
  private readonly oldList: Int32Array;
  private readonly newList: Int32Array;
  private oldLength = 0;

  constructor(
    hunts: readonly HuntLoad[],
    private readonly settings: PlannerSettings,
  ) {
    assertCurveInput(hunts, settings);
    const g = geometry(hunts, settings.bucketSeconds);
    this.g = g;
    const n = hunts.length;
    this.hunts = [...hunts];
    this.cpu = new Float64Array(g.buckets);
    this.mem = new Float64Array(g.buckets);
    this.pressure = new Float64Array(g.buckets);
    this.cover = Array.from({ length: g.buckets }, () => new Set<number>());
    this.cpuCap = cpuCapacityUs(settings);
    this.movable = new Uint8Array(n);
    this.period = new Float64Array(n);
    this.offset = new Float64Array(n);
    this.width = new Int32Array(n);
    this.cpuPer = new Float64Array(n);
    this.memory = new Float64Array(n);
    this.unit = new Float64Array(n);
    this.index = new Map();
    let longest = 1;
    hunts.forEach((hunt, i) => {
      const w = pulseWidth(hunt.cost.durationMs, g.bucketSeconds);
      this.index.set(hunt.huntId, i);
      this.movable[i] = hunt.movable ? 1 : 0;
      this.period[i] = hunt.periodSeconds;
      this.offset[i] = hunt.offsetSeconds;
      this.width[i] = w;
      this.cpuPer[i] = hunt.cost.cpuUs / w;
      this.memory[i] = hunt.cost.memoryBytes;
      this.unit[i] = pressureOf(hunt.cost.cpuUs / w, hunt.cost.memoryBytes, settings, this.cpuCap);
      longest = Math.max(longest, Math.ceil(g.hyperperiodSeconds / hunt.periodSeconds) * w);
    });
    this.oldCount = new Int32Array(g.buckets);
    this.newCount = new Int32Array(g.buckets);
    this.oldList = new Int32Array(Math.min(longest, g.buckets));
    this.newList = new Int32Array(Math.min(longest, g.buckets));
    depositAll(hunts, g, this.cpu, this.mem);
    for (let i = 0; i < n; i++) {
      const length = this.countInto(i, this.offset[i] ?? 0, this.newCount, this.newList);
      for (let k = 0; k < length; k++) {
        const b = this.newList[k] ?? 0;
        this.cover[b]?.add(i);
        this.newCount[b] = 0;
      }
    }
    for (let b = 0; b < g.buckets; b++) this.pressure[b] = this.pressureAt(b);
    this.objective = sumOfSquares(this.pressure);
  }

  private pressureAt(b: number): number {
    return pressureOf(this.cpu[b] ?? 0, this.mem[b] ?? 0, this.settings, this.cpuCap);
  }

  /**
   * Adds 1 to counts[b] for every bucket each fire of hunt i at `offset` covers (fires
   * φ + kT < H, d buckets from floor(t / Δ), wrapping), listing each bucket once in `list`.
   * Returns the list's length. The same walk as pulse.ts forEachCoveredBucket, inlined.
   */
  private countInto(i: number, offset: number, counts: Int32Array, list: Int32Array): number {
    const { hyperperiodSeconds: h, bucketSeconds: delta, buckets } = this.g;
    const period = this.period[i] ?? 1;
    const width = this.width[i] ?? 1;
    let length = 0;
    for (let t = offset; t < h; t += period) {
      let b = Math.floor(t / delta);
      for (let j = 0; j < width; j++) {
        if ((counts[b] = (counts[b] ?? 0) + 1) === 1) list[length++] = b;
        if (++b === buckets) b = 0;
      }
    }
    return length;
  }

  /** 1 for each hunt that may move this cycle: movable and not cooling down. */
  eligible(cycle: number, cooldown: CooldownState): Uint8Array {
    const ok = Uint8Array.from(this.movable);
    for (const [id, last] of cooldown) {
      const i = this.index.get(id);
      if (i !== undefined && cycle - last <= this.settings.cooldownCycles) ok[i] = 0;
    }
    return ok;
  }

  /**
   * J without hunt i minus J with it (≤ 0): its "marginal term". Keeps the hunt's current
   * coverage for `tryOffset`; call `endTrials` when done.
   */
  beginTrials(i: number): number {
    const q = this.unit[i] ?? 0;
    this.oldLength = this.countInto(i, this.offset[i] ?? 0, this.oldCount, this.oldList);
    let removal = 0;
    for (let k = 0; k < this.oldLength; k++) {
      const b = this.oldList[k] ?? 0;
      const p = this.pressure[b] ?? 0;
      const without = p - q * (this.oldCount[b] ?? 0);
      removal += without * without - p * p;
    }
    return removal;
  }

  /**
   * Hunt i's own part of J, J_i = Σ_b 2·P(b)·p_i(b) over the buckets it covers (p_i(b) its own
   * pressure there): the yardstick of the hysteresis (docs/smoothing.md "The controller").
   * O(fires × d), from the coverage `beginTrials(i)` recorded; only between it and `endTrials`.
   */
  partOfJ(i: number): number {
    const q = this.unit[i] ?? 0;
    let part = 0;
    for (let k = 0; k < this.oldLength; k++) {
      const b = this.oldList[k] ?? 0;
      part += 2 * (this.pressure[b] ?? 0) * q * (this.oldCount[b] ?? 0);
    }
    return part;
  }

  /**
   * Hunt i's own share of P(b): what leaves bucket b if it moves. Only between
   * `beginTrials(i)` and `endTrials`.
   */
  shareOf(i: number, b: number): number {
    return (this.unit[i] ?? 0) * (this.oldCount[b] ?? 0);
  }

  endTrials(): void {
    for (let k = 0; k < this.oldLength; k++) this.oldCount[this.oldList[k] ?? 0] = 0;
    this.oldLength = 0;
  }

  /**
   * ΔJ of moving hunt i to `offset`, given its removal term from `beginTrials`; null when the
   * move would raise some bucket's memory above the cap (buckets whose memory only falls or
   * stays may already be over it: a fleet over the cap can only get better).
   */
  tryOffset(i: number, offset: number, removal: number): number | null {
    const q = this.unit[i] ?? 0;
    const m = this.memory[i] ?? 0;
    const cap = this.settings.memoryCapBytes;
    const length = this.countInto(i, offset, this.newCount, this.newList);
    let delta = removal;
    let feasible = true;
    for (let k = 0; k < length; k++) {
      const b = this.newList[k] ?? 0;
      const now = this.newCount[b] ?? 0;
      const before = this.oldCount[b] ?? 0;
      if (now > before && m > 0 && (this.mem[b] ?? 0) + m * (now - before) > cap) feasible = false;
      const without = (this.pressure[b] ?? 0) - q * before;
      const withIt = without + q * now;
      delta += withIt * withIt - without * without;
      this.newCount[b] = 0;
    }
    return feasible ? delta : null;
  }

  /** Moves hunt i to `offset` and refreshes the touched buckets and J. */
  move(i: number, offset: number): void {
    const c = this.cpuPer[i] ?? 0;
    const m = this.memory[i] ?? 0;
    const shift = (at: number, sign: 1 | -1): void => {
      const length = this.countInto(i, at, this.newCount, this.newList);
      for (let k = 0; k < length; k++) {
        const b = this.newList[k] ?? 0;
        const times = (this.newCount[b] ?? 0) * sign;
        this.cpu[b] = (this.cpu[b] ?? 0) + c * times;
        this.mem[b] = (this.mem[b] ?? 0) + m * times;
        if (sign < 0) this.cover[b]?.delete(i);
        else this.cover[b]?.add(i);
        this.newCount[b] = 0;
        this.pressure[b] = this.pressureAt(b);
      }
    };
    shift(this.offset[i] ?? 0, -1);
    shift(offset, 1);
    this.offset[i] = offset;
    this.hunts[i] = { ...(this.hunts[i] as HuntLoad), offsetSeconds: offset };
    this.objective = sumOfSquares(this.pressure);
  }
}
