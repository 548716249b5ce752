import { createHash } from 'node:crypto';
import type { CatalogueBuiltins } from './builtins.js';
import type { CompiledQuery, QueryDefinition } from './types.js';
import { checkQuery, type QuerySource } from './definition.js';
import { catalogueInvalid } from './errors.js';
import { mergeLayers, type MergedQuery } from './merge.js';
import type { Layer } from './parse.js';
import { placeholderNames, replaceSentinels } from './sentinels.js';

/** The databases `data` and `otel` stand for (config: DFE_CLICKHOUSE_DATA_DATABASE, DFE_KEDA_SHIM_OTEL_DATABASE). */
export interface CatalogueDatabases {
  readonly dataDatabase: string;
  readonly otelDatabase: string;
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
  const fail = (key: 'params' | 'binds' | 'sql', value: string, problem: string) =>
    catalogueInvalid({ file: q.origin[key] ?? q.file, query: q.name, key, value, problem });
  for (const name of definition.params) {
    if (!used.includes(name)) throw fail('params', name, `has no {${name}:Type} placeholder in the SQL`);
  }
  for (const name of Object.keys(definition.binds)) {
    if (!used.includes(name)) throw fail('binds', name, `has no {${name}:Type} placeholder in the SQL`);
  }
  for (const name of used) {
    if (!definition.params.includes(name) && !Object.hasOwn(definition.binds, name)) {
      throw fail('sql', `{${name}:…}`, 'is a placeholder that is neither a param nor a bind, so every request would fail');
    }
  }
}

/** Hash of everything that affects an answer: a change drops the query's cache entries. */
export function fingerprintOf(query: Omit<CompiledQuery, 'fingerprint'>): string {
  const binds = Object.keys(query.binds)
    .sort()
    .map((k) => [k, query.binds[k]]);
  const material = JSON.stringify([
    query.name, query.database, query.databaseName, query.sql, query.params, binds, query.resultField, query.clampMin ?? null,
    query.clampMax ?? null, query.coldHold, query.timeoutSeconds, query.metricType, query.deadlineMs, query.freshForSeconds,
    query.maxStaleSeconds,
  ]);
  return createHash('sha256').update(material).digest('hex').slice(0, 16);
}

export function compileQuery(q: MergedQuery, inputs: CatalogueInputs): CompiledQuery {
  const { definition, source, warnings } = checkQuery(q);
  const databaseName = resolveDatabase(definition.database, inputs);
  const sql = sourceSql(source, databaseName, inputs.builtins);
  checkPlaceholders(q, definition, sql);
  const compiled = { ...definition, sql, databaseName };
  return Object.freeze({ ...compiled, fingerprint: fingerprintOf(compiled), ...(warnings.length > 0 ? { warnings: Object.freeze(warnings) } : {}) });
}

/** Layers (built-in first) → the compiled catalogue, or the first CATALOGUE_INVALID. */
export function compileCatalogue(layers: readonly Layer[], inputs: CatalogueInputs): ReadonlyMap<string, CompiledQuery> {
  const out = new Map<string, CompiledQuery>();
  for (const [name, merged] of mergeLayers(layers)) out.set(name, compileQuery(merged, inputs));
  return out;
}
