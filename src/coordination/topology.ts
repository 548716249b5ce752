import type { ClickHouseClient } from '@clickhouse/client';
import type { ClickHouseSettings } from '@clickhouse/client';
import type { ClickHouseConfig } from '../config/load.js';
import { DfeError, describeError } from '../errors.js';
import { schemaSteps } from './schema.js';
import { DEFAULT_SCHEMA_OPTIONS, type ResolvedTopology, type SchemaOptions, type SchemaStep } from './tables.js';

/**
 * Topology `auto` (docs/tables.md#topology): a Replicated database → replicated tables in it;
 * `shard` + `replica` macros → replicated tables ON CLUSTER; else single node. A process
 * resolves it once and hands the result on (the runner takes it as `topology`).
 */
export async function resolveTopology(
  client: ClickHouseClient,
  config: Pick<ClickHouseConfig, 'dataDatabase' | 'topology' | 'cluster'>,
): Promise<ResolvedTopology> {
  const { dataDatabase: database, topology: wanted, cluster } = config;
  if (wanted === 'single') return { kind: 'single' };
  const engineRows = await client.query({
    query: 'SELECT engine FROM system.databases WHERE name = {db:String}',
    query_params: { db: database },
    format: 'JSONEachRow',
  });
  const engines = await engineRows.json<{ engine: string }>();
  if (engines[0]?.engine === 'Replicated') return { kind: 'replicated-database' };
  const macroRows = await client.query({
    query: "SELECT count() AS n FROM system.macros WHERE macro IN ('shard', 'replica')",
    format: 'JSONEachRow',
  });
  const macros = await macroRows.json<{ n: number | string }>();
  if (Number(macros[0]?.n ?? 0) === 2) return { kind: 'cluster', cluster };
  return wanted === 'replicated' ? { kind: 'cluster', cluster } : { kind: 'single' };
}

/**
 * Quorum settings for coordination reads and writes on replicated tables, so a
 * claim's read-back sees every competing claim (docs/tables.md#topology).
 */
export interface CoordinationSettings {
  readonly read: ClickHouseSettings;
  readonly write: ClickHouseSettings;
}

export function coordinationSettings(topology: ResolvedTopology): CoordinationSettings {
  if (topology.kind === 'single') return { read: {}, write: {} };
  return {
    read: { select_sequential_consistency: '1' },
    write: { insert_quorum: 'auto', insert_quorum_parallel: 0 },
  };
}

/** The object's row in system.tables (its engine and comment), or undefined when there is none. */
async function tableRow(client: ClickHouseClient, database: string, table: string): Promise<{ engine_full: string; comment: string } | undefined> {
  const rs = await client.query({
    query: 'SELECT engine_full, comment FROM system.tables WHERE database = {db:String} AND name = {table:String}',
    query_params: { db: database, table },
    format: 'JSONEachRow',
  });
  const [row] = await rs.json<{ engine_full: string; comment: string }>();
  return row;
}

/** The table's TTL as the server renders it, or '' when it has none. */
async function currentTtl(client: ClickHouseClient, database: string, table: string): Promise<string | undefined> {
  const row = await tableRow(client, database, table);
  if (!row) return undefined;
  return /\bTTL (.+?)(?: SETTINGS |$)/.exec(row.engine_full)?.[1]?.trim() ?? '';
}

/**
 * Runs every DDL step; each is idempotent: CREATE and ADD … IF NOT EXISTS by
 * themselves, MODIFY TTL because it runs only when the table's TTL differs
 * (it would rewrite the table's parts every time). Returns every statement.
 */
export async function applySchema(
  client: ClickHouseClient,
  database: string,
  topology: ResolvedTopology,
  options: SchemaOptions = DEFAULT_SCHEMA_OPTIONS,
): Promise<string[]> {
  const steps = schemaSteps(database, topology, options);
  for (const step of steps) {
    if (step.ttl && (await currentTtl(client, database, step.ttl.table)) === step.ttl.expr) continue;
    if (step.onlyIfExists) {
      const comment = await currentComment(client, database, step.onlyIfExists.table);
      if (comment === undefined || comment === step.onlyIfExists.unlessComment) continue;
    }
    await runStep(client, step);
  }
  return steps.map((s) => s.query);
}

/** A step a setting asks for fails naming the setting, its value and what it needs. */
async function runStep(client: ClickHouseClient, step: SchemaStep): Promise<void> {
  try {
    await client.command({ query: step.query });
  } catch (err) {
    if (!step.setting) throw err;
    const { key, value, needs } = step.setting;
    throw new DfeError('CONFIG_INVALID', `${key}=${value} needs ${needs}; the server refused it: ${describeError(err)} (set ${key}=0 to go without)`, {
      key,
      value,
      cause: err,
    });
  }
}

/** The object's comment in system.tables, or undefined when there is no such object. */
async function currentComment(client: ClickHouseClient, database: string, table: string): Promise<string | undefined> {
  return (await tableRow(client, database, table))?.comment;
}
