import { backlogSchemaSteps } from './backlog-refresh.js';
import { DEFAULT_SCHEMA_OPTIONS, tableSchemaSteps, type ResolvedTopology, type SchemaOptions, type SchemaStep } from './tables.js';

/**
 * Every step of `schema --apply`, in order: the coordination tables (tables.ts), then the
 * backlog's table and view (backlog-refresh.ts). topology.ts runs them; `--print` shows them.
 */
export function schemaSteps(database: string, topology: ResolvedTopology, options: SchemaOptions = DEFAULT_SCHEMA_OPTIONS): SchemaStep[] {
  return [...tableSchemaSteps(database, topology, options), ...backlogSchemaSteps(database, topology, options.backlogRefreshSeconds)];
}

/** Every statement `schema --apply` runs (or finds already true), in order; `--print` shows them. */
export function schemaDdl(database: string, topology: ResolvedTopology, options: SchemaOptions = DEFAULT_SCHEMA_OPTIONS): string[] {
  return schemaSteps(database, topology, options).map((s) => s.query);
}
