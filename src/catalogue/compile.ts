import { createHash } from 'node:crypto';
import type { CatalogueBuiltins } from './builtins.js';
import type { BatchDefinition, CatalogueWarning, CompiledQuery, QueryDefinition } from './types.js';
import { checkQuery, type QuerySource } from './definition.js';
import { catalogueInvalid } from './errors.js';
import { mergeLayers, type MergedQuery } from './merge.js';
import type { Layer } from './parse.js';
import { placeholderNames, replaceSentinels } from './sentinels.js';
import { describeDropped, type DroppedPart } from './sql-ties.js';

/** The databases `data` and `otel` stand for (config: DFE_CLICKHOUSE_DATA_DATABASE, DFE_KEDA_SHIM_OTEL_DATABASE). */
export interface CatalogueDatabases {
  readonly dataDatabase: string;
  readonly otelDatabase: string;
  /**
   * Request parameters the shim reads itself beyond `hold` and `api_key`: the
   * configured API-key parameter (DFE_KEDA_SHIM_AUTH_API_KEY_PARAM). A query
   * may not declare one, or the key would be bound and cached.
   */
  readonly reservedParams?: readonly string[] | undefined;
}

/** Everything compiling needs besides the YAML: the databases and the built-ins registry. */
export interface CatalogueInputs extends CatalogueDatabases {
  readonly builtins: CatalogueBuiltins;
}

export function resolveDatabase(database: string, dbs: CatalogueDatabases): string {
  if (database === 'data') return dbs.dataDatabase;
  if (database === 'otel') return dbs.otelDatabase;
  return database;
}

function sourceSql(source: QuerySource, databaseName: string, builtins: CatalogueBuiltins): string {
  // hunt_backlog is THE due-hunt SQL (docs/tables.md#the-due-rule), shared with the runner's gate; the registry supplies it.
  if (source.kind === 'builtin') return builtins.queries[source.builtin](databaseName).trim();
  return replaceSentinels(source.sql, databaseName, builtins.sentinels);
}

/** Every declared param and bind needs a placeholder, and every placeholder a value. */
function checkPlaceholders(q: MergedQuery, definition: QueryDefinition, sql: string): void {
  const used = placeholderNames(sql);
  const fail = (key: 'params' | 'binds' | 'sql', value: string, problem: string, file = q.origin[key] ?? q.file) =>
    catalogueInvalid({ file, query: q.name, key, value, problem });
  const missing = (key: 'params' | 'binds', name: string) => fail(key, name, `has no {${name}:Type} placeholder in the SQL`);
  for (const name of definition.params) {
    if (!used.includes(name)) throw missing('params', name);
  }
  for (const name of Object.keys(definition.binds)) {
    if (!used.includes(name)) throw missing('binds', name);
  }
  for (const name of used) {
    if (!definition.params.includes(name) && !Object.hasOwn(definition.binds, name)) {
      throw fail('sql', `{${name}:…}`, 'is a placeholder that is neither a param nor a bind, so every request would fail');
    }
  }
}

/**
 * The batch SQL: sentinels replaced; every param and bind has a placeholder, every
 * placeholder is one, and the batched param's is an `Array(...)`.
 */
function compileBatch(q: MergedQuery, definition: QueryDefinition, databaseName: string, inputs: CatalogueInputs): BatchDefinition | undefined {
  const batch = definition.batch;
  if (batch === undefined) return undefined;
  const batchFile = q.origin['batch'] ?? q.file;
  const fail = (key: string, value: unknown, problem: string, file = batchFile) =>
    catalogueInvalid({ file, query: q.name, key: `batch.${key}`, value, problem });
  const sql = replaceSentinels(batch.sql, databaseName, inputs.builtins.sentinels);
  const used = placeholderNames(sql);
  for (const name of [...definition.params, ...Object.keys(definition.binds)]) {
    if (!used.includes(name)) throw fail('sql', name, `has no {${name}:Type} placeholder in the batch SQL`);
  }
  for (const name of used) {
    if (!definition.params.includes(name) && !Object.hasOwn(definition.binds, name)) {
      throw fail('sql', `{${name}:…}`, 'is a placeholder that is neither a param nor a bind, so every batch would fail');
    }
  }
  const arrayType = new RegExp(`\\{\\s*${batch.param}\\s*:\\s*Array\\(`);
  if (!arrayType.test(sql)) throw fail('sql', batch.param, `must be bound as an array in the batch SQL: {${batch.param}:Array(String)}`);
  return Object.freeze({ ...batch, sql });
}

/** Hash of everything that affects an answer: a change drops the query's cache entries. */
export function fingerprintOf(query: Omit<CompiledQuery, 'fingerprint'>): string {
  const binds = Object.keys(query.binds)
    .sort()
    .map((k) => [k, query.binds[k]]);
  const material = JSON.stringify([
    query.name, query.database, query.databaseName, query.sql, query.params, binds, query.resultField, query.clampMin ?? null,
    query.clampMax ?? null, query.coldHold, query.timeoutSeconds, query.metricType, query.deadlineMs, query.freshForSeconds,
    query.maxStaleSeconds, query.batch ?? null,
  ]);
  return createHash('sha256').update(material).digest('hex').slice(0, 16);
}

/**
 * Params and binds an earlier file set for a SQL a later file replaced: those the new SQL
 * has no placeholder for go with the old SQL (sql-ties.ts), the rest stay.
 */
function dropUnusedTies(q: MergedQuery, definition: QueryDefinition, sql: string): { definition: QueryDefinition; dropped: DroppedPart[] } {
  const ties = q.ties;
  if (ties === undefined) return { definition, dropped: [] };
  const used = placeholderNames(sql);
  const unused = (names: Readonly<Record<string, string>>, key: string) =>
    Object.entries(names)
      .filter(([name]) => !used.includes(name))
      .map(([name, file]) => ({ name, part: { part: `${key}.${name}`, file } }));
  const params = unused(ties.inheritedParams, 'params');
  const binds = unused(ties.inheritedBinds, 'binds');
  const gone = (list: ReadonlyArray<{ name: string }>) => new Set(list.map((x) => x.name));
  const goneParams = gone(params);
  const goneBinds = gone(binds);
  return {
    definition: {
      ...definition,
      params: definition.params.filter((name) => !goneParams.has(name)),
      binds: Object.fromEntries(Object.entries(definition.binds).filter(([name]) => !goneBinds.has(name))),
    },
    dropped: [...ties.dropped, ...params.map((x) => x.part), ...binds.map((x) => x.part)],
  };
}

function droppedWarning(q: MergedQuery, dropped: readonly DroppedPart[]): CatalogueWarning[] {
  if (dropped.length === 0 || q.ties === undefined) return [];
  const file = q.ties.file;
  const value = dropped.map((d) => d.part);
  return [{ file, query: q.name, key: q.raw.sql === undefined ? 'builtin' : 'sql', value, message: describeDropped(file, q.name, dropped) }];
}

export function compileQuery(q: MergedQuery, inputs: CatalogueInputs): CompiledQuery {
  const checked = checkQuery(q);
  const source = checked.source;
  const reserved = checked.definition.params.find((name) => inputs.reservedParams?.includes(name));
  if (reserved !== undefined) {
    throw catalogueInvalid({
      file: q.origin['params'] ?? q.file,
      query: q.name,
      key: 'params',
      value: reserved,
      problem: 'is reserved by the shim (DFE_KEDA_SHIM_AUTH_API_KEY_PARAM: the API key) and cannot be declared',
    });
  }
  const databaseName = resolveDatabase(checked.definition.database, inputs);
  const sql = sourceSql(source, databaseName, inputs.builtins);
  const { definition, dropped } = dropUnusedTies(q, checked.definition, sql);
  checkPlaceholders(q, definition, sql);
  const batch = compileBatch(q, definition, databaseName, inputs);
  const compiled = { ...definition, sql, databaseName, ...(batch === undefined ? {} : { batch }) };
  const warnings = [...droppedWarning(q, dropped), ...checked.warnings];
  return Object.freeze({ ...compiled, fingerprint: fingerprintOf(compiled), ...(warnings.length > 0 ? { warnings: Object.freeze(warnings) } : {}) });
}

/** Layers (built-in first) → the compiled catalogue, or the first CATALOGUE_INVALID. */
export function compileCatalogue(layers: readonly Layer[], inputs: CatalogueInputs): ReadonlyMap<string, CompiledQuery> {
  const out = new Map<string, CompiledQuery>();
  for (const [name, merged] of mergeLayers(layers)) out.set(name, compileQuery(merged, inputs));
  return out;
}
