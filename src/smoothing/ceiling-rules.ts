import type { AutoDisableConfig } from '../config/load.js';
import type { HuntCeilings } from '../schedule/ceilings.js';
import type { CeilingResource } from './metrics.js';
import type { HuntCost } from './model.js';

/** A hunt's ceilings: its file's value where it sets one, else the global one (pure). */
export function effectiveCeilings(config: AutoDisableConfig, own: HuntCeilings | undefined): HuntCeilings {
  return {
    memoryBytes: own?.memoryBytes ?? config.maxP95MemoryBytes,
    cpuUs: own?.cpuUs ?? config.maxP95CpuUs,
    durationMs: own?.durationMs ?? config.maxP95DurationMs,
  };
}

/** The ceilings a cost crosses, in a fixed order (pure). */
export function ceilingBreaches(cost: HuntCost, ceilings: HuntCeilings): CeilingResource[] {
  const out: CeilingResource[] = [];
  if (ceilings.memoryBytes !== undefined && cost.memoryBytes > ceilings.memoryBytes) out.push('memory');
  if (ceilings.cpuUs !== undefined && cost.cpuUs > ceilings.cpuUs) out.push('cpu');
  if (ceilings.durationMs !== undefined && cost.durationMs > ceilings.durationMs) out.push('duration');
  return out;
}
