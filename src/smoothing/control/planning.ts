import type { ClickHouseClient } from '@clickhouse/client';
import type { SmoothingConfig } from '../../config/load.js';
import type { CoordinationSettings } from '../../coordination/topology.js';
import { cooldownFromSchedule, huntLoads, plannerSettings, type Capacity, type FleetView } from '../fleet-view.js';
import type { CooldownState, HuntLoad, PlannerSettings } from '../model.js';
import { probeCostSource, type CostSource } from '../store/cost-source.js';
import { readFleet, resolveCapacity } from '../store/fleet.js';

/** Everything one planning step needs, read in one go (docs/smoothing.md "The controller in the runner"). */
export interface PlanningInput {
  readonly view: FleetView;
  readonly capacity: Capacity;
  readonly planner: PlannerSettings;
  /** The planner's hunts: pinned and disabled ones load the curve but never move. */
  readonly loads: HuntLoad[];
  /** Cool-downs from moved_at, so they survive restarts and planner hand-overs. */
  readonly cooldown: CooldownState;
}

/**
 * Reads the planning input for the controller and `smoothing plan|apply|status|export`.
 * The cost source and the capacity are resolved on the first read and kept: they describe
 * the server, which does not change between cycles.
 */
export class PlanningReader {
  private costSource: CostSource | undefined;
  private capacity: Capacity | undefined;

  constructor(
    private readonly client: ClickHouseClient,
    private readonly database: string,
    private readonly settings: CoordinationSettings,
    private readonly config: SmoothingConfig,
  ) {}

  async read(): Promise<PlanningInput> {
    const { client, database, settings, config } = this;
    this.costSource ??= await probeCostSource(client);
    const [view, capacity] = await Promise.all([
      readFleet(client, database, settings, this.costSource, config.costWindowSeconds),
      this.capacity ?? resolveCapacity(client, config),
    ]);
    this.capacity = capacity;
    return {
      view,
      capacity,
      planner: plannerSettings(config, capacity),
      loads: huntLoads(view),
      cooldown: cooldownFromSchedule(view.schedule, config.cycleSeconds),
    };
  }
}
