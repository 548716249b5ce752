/**
 * The coordination tables (docs/tables.md#the-tables): their names, defined once (a leaf
 * module, so the due SQL and the DDL in tables.ts can both import it). Same names, columns and
 * engines as the original, so both can share a cluster.
 */
export const TABLES = Object.freeze({
  schedule: 'hunt_schedule',
  lease: 'hunt_lease',
  watermark: 'hunt_watermark',
  state: 'hunt_state',
  run: 'hunt_run',
  heartbeat: 'hunt_runner_heartbeat',
  /** Coordination choices, key → value (the claim mode: docs/claim-protocol.md#choosing-the-mode). */
  coordination: 'hunt_coordination',
  /** The KeeperMap table of Keeper-mode claims (docs/claim-protocol.md#keeper-mode); not in TABLE_DEFS. */
  claim: 'hunt_claim',
  /** The server-refreshed due count, one row per refresh (docs/tables.md#the-server-refreshed-count); not in TABLE_DEFS. */
  backlog: 'hunt_backlog',
  /** The refreshable view that appends to hunt_backlog, when DFE_BACKLOG_REFRESH_SECONDS > 0. */
  backlogRefresh: 'hunt_backlog_refresh',
});

/** hunt_run.status values. `requested` rows are run-now requests (docs/tables.md#run-now). */
export const RUN_STATUS = Object.freeze({
  requested: 'requested',
  succeeded: 'succeeded',
  failed: 'failed',
});

