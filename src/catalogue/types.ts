/**
 * The compiled query catalogue: what the fail-safe path and the HTTP routes
 * consume. catalogue/ turns YAML (built-in + override) into these; nothing
 * downstream reads YAML.
 */
export type MetricType = 'AverageValue' | 'Value';
export type BindValue = string | number | boolean;

export interface QueryDefinition {
  /** `[A-Za-z0-9_-]+`; also the route `/q/<name>`. */
  readonly name: string;
  /** `data` | `otel` | a literal database name, as written in YAML. */
  readonly database: string;
  /** Request parameters, all required, bound server-side as ClickHouse query parameters. */
  readonly params: readonly string[];
  /** Fixed bind values; request params are laid over them. */
  readonly binds: Readonly<Record<string, BindValue>>;
  /** Column index (number) or name (string) in row 0. Default 0. */
  readonly resultField: number | string;
  readonly clampMin: number | undefined;
  readonly clampMax: number | undefined;
  /** Answer on failure when no good value exists yet. Default 0. */
  readonly coldHold: number;
  /** ClickHouse max_execution_time AND client-side abort. Default 5 s. */
  readonly timeoutSeconds: number;
  /** How KEDA/the HPA use the value (docs/failsafe.md#metric_type-value-and-hold). Default AverageValue. */
  readonly metricType: MetricType;
  /** Answer by then, from the cache if the query is still running. Default 2000 ms. */
  readonly deadlineMs: number;
  /** Reuse a good value this long without asking ClickHouse. Default 0. */
  readonly freshForSeconds: number;
  /** Hold a last-good value at most this long, then answer 503. Default null (forever). */
  readonly maxStaleSeconds: number | null;
  /** The batch form (docs/catalogue.md#batch), when declared. */
  readonly batch?: BatchDefinition | undefined;
}

/** One query for many keys that differ only in `param`; its SQL is set on compile. */
export interface BatchDefinition {
  /** The declared param whose values are collected; bound as an `Array(...)` in the batch SQL. */
  readonly param: string;
  /** Most keys in one batch. Default 500. */
  readonly maxSize: number;
  /**
   * How long a batch that already holds more than one key lingers after its last join
   * (0: not at all); a lone key never waits (docs/catalogue.md#batch). Default 10 ms.
   */
  readonly windowMs: number;
  /** As written (checked) before compile; after compile: sentinels replaced, values still placeholders. */
  readonly sql: string;
}

/** A catalogue setting that loads but is probably a mistake; logged at load, never fatal. */
export interface CatalogueWarning {
  readonly file: string;
  readonly query: string;
  readonly key: string;
  readonly value: unknown;
  /** One line naming file, query, key and value. */
  readonly message: string;
}

export interface CompiledQuery extends QueryDefinition {
  /** Final SQL: sentinels replaced, database resolved and quoted; values stay `{name:Type}` placeholders. */
  readonly sql: string;
  /** Resolved database name (unquoted). */
  readonly databaseName: string;
  /** Hash of everything that affects the answer; a change drops the query's cache entries. */
  readonly fingerprint: string;
  /** Settings that load but are probably mistakes (logged at load). */
  readonly warnings?: readonly CatalogueWarning[];
}

export interface CatalogueSource {
  readonly builtinPath: string;
  readonly overridePath: string | undefined;
  /** Hash of the override file's content, or undefined when there is none. */
  readonly overrideHash: string | undefined;
}

export interface Catalogue {
  readonly queries: ReadonlyMap<string, CompiledQuery>;
  readonly source: CatalogueSource;
  readonly loadedAtMs: number;
}

/** Defaults of every optional key, in one place. */
export const QUERY_DEFAULTS = Object.freeze({
  resultField: 0,
  coldHold: 0,
  timeoutSeconds: 5,
  metricType: 'AverageValue' as MetricType,
  deadlineMs: 2000,
  freshForSeconds: 0,
  maxStaleSeconds: null as number | null,
});

/** Defaults of the optional keys of a `batch:` block. */
export const BATCH_DEFAULTS = Object.freeze({ maxSize: 500, windowMs: 10 });

/** What a reload did; `changed` and `removed` name queries whose cache entries must go. */
export type CatalogueEvent =
  | {
      readonly kind: 'applied';
      readonly catalogue: Catalogue;
      readonly previous: Catalogue;
      readonly changed: readonly string[];
      readonly removed: readonly string[];
    }
  | {
      readonly kind: 'rejected';
      readonly error: Error;
      readonly file: string | undefined;
      /** The file had no content: most likely a writer mid-write (truncate, then write); logged as a warning. */
      readonly empty?: boolean;
    };

/** The live catalogue as the shim sees it (implemented by catalogue/store.ts). */
export interface CatalogueProvider {
  current(): Catalogue;
  /** Returns an unsubscribe function. */
  subscribe(listener: (event: CatalogueEvent) => void): () => void;
}
