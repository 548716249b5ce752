import { cpuCapacityUs, depositAll, pressureOf, sumOfSquares } from './curve.js';
import type { HuntLoad, PlannerSettings } from './model.js';
import { assertCurveInput, forEachCoveredBucket, geometry, pulseWidth, type Geometry } from './pulse.js';

/**
 * The planner's working copy of the curve, kept up to date move by move so that trying an
 * offset costs O(fires × d) (the buckets the hunt leaves and lands in), never O(B).
 * docs/smoothing.md "Making a cycle cheap".
 */
export interface Trial {
  readonly offset: number;
  /** J(after) − J(now). */
  readonly deltaJ: number;
}

export class CurveState {
  readonly g: Geometry;
  readonly hunts: HuntLoad[];
  readonly cpu: Float64Array;
  readonly mem: Float64Array;
  readonly pressure: Float64Array;
  /** Hunts covering each bucket (by index into `hunts`). */
  readonly cover: Array<Set<number>>;
  objective = 0;
  private readonly cpuCap: number;
  private readonly width: Int32Array;
  /** Pressure one covered bucket receives from the hunt. */
  private readonly unit: Float64Array;
  private readonly oldCount: Int32Array;
  private readonly newCount: Int32Array;
  private readonly touched: number[] = [];

  constructor(
    hunts: readonly HuntLoad[],
    private readonly settings: PlannerSettings,
  ) {
    assertCurveInput(hunts, settings);
    this.g = geometry(hunts, settings.bucketSeconds);
    const n = hunts.length;
    const buckets = this.g.buckets;
    this.hunts = [...hunts];
    this.cpu = new Float64Array(buckets);
    this.mem = new Float64Array(buckets);
    this.pressure = new Float64Array(buckets);
    this.cover = Array.from({ length: buckets }, () => new Set<number>());
    this.cpuCap = cpuCapacityUs(settings);
    this.width = new Int32Array(n);
    this.unit = new Float64Array(n);
    this.oldCount = new Int32Array(buckets);
    this.newCount = new Int32Array(buckets);
    depositAll(hunts, this.g, this.cpu, this.mem);
    hunts.forEach((hunt, i) => {
      const w = pulseWidth(hunt.cost.durationMs, this.g.bucketSeconds);
      this.width[i] = w;
      this.unit[i] = pressureOf(hunt.cost.cpuUs / w, hunt.cost.memoryBytes, settings, this.cpuCap);
      this.visit(i, hunt.offsetSeconds, (b) => this.cover[b]?.add(i));
    });
    for (let b = 0; b < buckets; b++) this.pressure[b] = this.pressureAt(b);
    this.objective = sumOfSquares(this.pressure);
  }

  private pressureAt(b: number): number {
    return pressureOf(this.cpu[b] ?? 0, this.mem[b] ?? 0, this.settings, this.cpuCap);
  }

  private visit(i: number, offset: number, fn: (b: number) => void): void {
    const hunt = this.hunts[i] as HuntLoad;
    forEachCoveredBucket(this.g, hunt.periodSeconds, offset, this.width[i] ?? 1, fn);
  }

  /**
   * J without hunt i minus J with it (≤ 0): its "marginal term". Leaves oldCount filled with
   * how often the hunt covers each bucket, for `tryOffset`; call `endTrials` when done.
   */
  beginTrials(i: number): number {
    const q = this.unit[i] ?? 0;
    const touched: number[] = [];
    this.visit(i, (this.hunts[i] as HuntLoad).offsetSeconds, (b) => {
      if ((this.oldCount[b] = (this.oldCount[b] ?? 0) + 1) === 1) touched.push(b);
    });
    let removal = 0;
    for (const b of touched) {
      const p = this.pressure[b] ?? 0;
      const without = p - q * (this.oldCount[b] ?? 0);
      removal += without * without - p * p;
    }
    this.touched.splice(0, this.touched.length, ...touched);
    return removal;
  }

  endTrials(): void {
    for (const b of this.touched) this.oldCount[b] = 0;
    this.touched.length = 0;
  }

  /**
   * ΔJ of moving hunt i to `offset`, given its removal term from `beginTrials`; null when the
   * move would raise some bucket's memory above the cap (buckets whose memory only falls or
   * stays may already be over it: a fleet over the cap can only get better).
   */
  tryOffset(i: number, offset: number, removal: number): number | null {
    const q = this.unit[i] ?? 0;
    const m = (this.hunts[i] as HuntLoad).cost.memoryBytes;
    const cap = this.settings.memoryCapBytes;
    const landed: number[] = [];
    this.visit(i, offset, (b) => {
      if ((this.newCount[b] = (this.newCount[b] ?? 0) + 1) === 1) landed.push(b);
    });
    let delta = removal;
    let feasible = true;
    for (const b of landed) {
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
    const hunt = this.hunts[i] as HuntLoad;
    const c = hunt.cost.cpuUs / (this.width[i] ?? 1);
    const m = hunt.cost.memoryBytes;
    const touched = new Set<number>();
    this.visit(i, hunt.offsetSeconds, (b) => {
      this.cpu[b] = (this.cpu[b] ?? 0) - c;
      this.mem[b] = (this.mem[b] ?? 0) - m;
      this.cover[b]?.delete(i);
      touched.add(b);
    });
    this.visit(i, offset, (b) => {
      this.cpu[b] = (this.cpu[b] ?? 0) + c;
      this.mem[b] = (this.mem[b] ?? 0) + m;
      this.cover[b]?.add(i);
      touched.add(b);
    });
    for (const b of touched) this.pressure[b] = this.pressureAt(b);
    this.hunts[i] = { ...hunt, offsetSeconds: offset };
    this.objective = sumOfSquares(this.pressure);
  }
}
