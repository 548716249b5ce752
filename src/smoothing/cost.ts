import type { HuntCost } from './model.js';

export interface RunSample { readonly durationMs: number; readonly cpuUs: number; readonly memoryBytes: number }

/** STUB */
export function p95(values: readonly number[]): number { return values.length === 0 ? 0 : Math.max(...values); }
/** STUB */
export function costFromRuns(_runs: readonly RunSample[]): HuntCost | null { return null; }
/** STUB */
export function fillMissingCosts(costs: ReadonlyMap<string, HuntCost | null>, _huntIds: readonly string[]): Map<string, HuntCost> {
  return new Map([...costs].filter((e): e is [string, HuntCost] => e[1] !== null));
}
