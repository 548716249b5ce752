import type { AppConfig } from '../config/load.js';
import { DfeError } from '../errors.js';
import type { Logger } from '../log.js';
import { Coordinator, type DueFire } from '../coordination/coordinator.js';
import { materialise, materialiseSummary, readSchedule, warnMaterialise } from '../coordination/materialise.js';
import { withCoordination } from '../coordination/open.js';
import { probeAndRecord, type ProbeResult } from '../coordination/claims/mode.js';
import { schemaDdl } from '../coordination/schema.js';
import { keeperClaimTableDdl } from '../coordination/tables.js';
import { applySchema } from '../coordination/topology.js';
import { loadHuntsDir, logHuntSet } from '../schedule/hunt-files.js';

/**
 * The one-shot commands of `dfe-hunt-runner` that are the runner's (docs/runner.md#cli), each one
 * function that opens ClickHouse, does its job and closes; the CLI prints.
 */

/** The coordination tables' DDL for this topology, one statement each. */
export function schemaStatements(config: AppConfig): Promise<{ readonly statements: readonly string[] }> {
  return withCoordination(config, async ({ topology }) => {
    const database = config.clickhouse.dataDatabase;
    const statements = schemaDdl(database, topology, config.clickhouse);
    // Keeper claims' table too, unless the table protocol is forced, as a comment: `--apply`
    // creates it only where the probe finds KeeperMap working and records the mode
    // (docs/claim-protocol.md#choosing-the-mode), so piping this output to a server without
    // KeeperMap still applies cleanly.
    if (config.runner.claims === 'tables') return { statements };
    const keeper =
      '-- Keeper claims: `schema --apply` creates this where KeeperMap works (needs <keeper_map_path_prefix>) and records the mode; else runners use the table protocol\n' +
      `-- ${keeperClaimTableDdl(database, topology)}`;
    return { statements: [...statements, keeper] };
  });
}

/** Applies that DDL (each statement idempotent); returns the topology kind and the count. */
export function applySchemaNow(config: AppConfig): Promise<{ readonly kind: string; readonly count: number; readonly claims: ProbeResult }> {
  return withCoordination(config, async ({ handle, topology, settings }) => {
    const database = config.clickhouse.dataDatabase;
    const statements = await applySchema(handle.client, database, topology, config.clickhouse);
    // Whether KeeperMap works here decides the claim mode `auto` runners follow (docs/claim-protocol.md#choosing-the-mode).
    const claims = await probeAndRecord(handle.client, database, topology, settings.write);
    return { kind: topology.kind, count: statements.length, claims };
  });
}

/** Writes hunt_schedule from the hunts directory; returns the one-line summary. */
export function materialiseHunts(config: AppConfig, log: Logger): Promise<string> {
  const set = loadHuntsDir(config.runner.huntsDir, config.runner.spreadFraction);
  logHuntSet(log, set);
  return withCoordination(config, async ({ handle, settings }) => {
    const plan = await materialise(handle.client, config.clickhouse.dataDatabase, set.hunts, settings);
    warnMaterialise(log, plan);
    return materialiseSummary(plan, config.clickhouse.dataDatabase);
  });
}

export function dueNow(config: AppConfig): Promise<DueFire[]> {
  return withCoordination(config, ({ handle, settings }) => new Coordinator(handle.client, config.clickhouse.dataDatabase, settings).dueNow());
}

/** A run-now request of a scheduled, enabled hunt; returns its fire. */
export function requestRunNow(config: AppConfig, huntId: string): Promise<number> {
  const database = config.clickhouse.dataDatabase;
  return withCoordination(config, async ({ handle, settings }) => {
    const known = (await readSchedule(handle.client, database, settings)).some((r) => r.hunt_id === huntId && r.enabled === 1);
    if (!known) {
      throw new DfeError('PARAM_INVALID', `hunt ${JSON.stringify(huntId)} is not in ${database}.hunt_schedule (run materialise first?)`, {
        key: 'hunt_id',
        value: huntId,
      });
    }
    return new Coordinator(handle.client, database, settings).requestRun(huntId);
  });
}
