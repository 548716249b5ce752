import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import type { ClickHouseHandle } from '../../src/clickhouse/client.js';
import type { Clock } from '../../src/clock.js';
import { loadConfig, type ShimConfig } from '../../src/config/load.js';
import type { Logger } from '../../src/log.js';
import { buildShimApp } from '../../src/shim/app.js';
import { QUERY_DEFAULTS, type Catalogue, type CatalogueEvent, type CatalogueProvider, type CompiledQuery } from '../../src/catalogue/types.js';

/** A CompiledQuery with QUERY_DEFAULTS filled in; tests name only what they care about. */
export function compiled(name: string, sql: string, over: Partial<CompiledQuery> = {}): CompiledQuery {
  return Object.freeze({
    ...QUERY_DEFAULTS,
    name,
    database: 'data',
    databaseName: 'data',
    params: [],
    binds: {},
    clampMin: undefined,
    clampMax: undefined,
    sql,
    fingerprint: `${name}:${sql}`,
    ...over,
  });
}

/** A minimal in-test CatalogueProvider whose catalogue a test swaps by hand (firing `applied`). */
export class TestCatalogue implements CatalogueProvider {
  private catalogue: Catalogue;
  private readonly listeners = new Set<(event: CatalogueEvent) => void>();

  constructor(queries: readonly CompiledQuery[], loadedAtMs = 0) {
    this.catalogue = TestCatalogue.make(queries, loadedAtMs);
  }

  private static make(queries: readonly CompiledQuery[], loadedAtMs: number): Catalogue {
    return {
      queries: new Map(queries.map((q) => [q.name, q])),
      source: { builtinPath: 'test', overridePath: undefined, overrideHash: undefined },
      loadedAtMs,
    };
  }

  current(): Catalogue {
    return this.catalogue;
  }

  subscribe(listener: (event: CatalogueEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Swaps in `queries`, naming changed (by fingerprint) and removed ones, like a reload would. */
  apply(queries: readonly CompiledQuery[]): void {
    const previous = this.catalogue;
    const next = TestCatalogue.make(queries, previous.loadedAtMs + 1);
    const changed = [...next.queries.values()]
      .filter((q) => previous.queries.has(q.name) && previous.queries.get(q.name)?.fingerprint !== q.fingerprint)
      .map((q) => q.name);
    const removed = [...previous.queries.keys()].filter((n) => !next.queries.has(n));
    this.catalogue = next;
    for (const l of this.listeners) l({ kind: 'applied', catalogue: next, previous, changed, removed });
  }

  reject(error: Error): void {
    for (const l of this.listeners) l({ kind: 'rejected', error, file: 'override.yaml' });
  }
}

/** The shim section of a config built from env overrides, as production builds it. */
export function shimConfig(env: Record<string, string> = {}): ShimConfig {
  return loadConfig({ ...env }).shim;
}

export interface AppUnderTest {
  readonly app: FastifyInstance;
  readonly catalogue: TestCatalogue;
}

export async function makeApp(options: {
  queries: readonly CompiledQuery[];
  clickhouse: Pick<ClickHouseHandle, 'backend' | 'target' | 'client' | 'afterQueryError'>;
  clock?: Clock;
  env?: Record<string, string>;
  logger?: Logger;
}): Promise<AppUnderTest> {
  const catalogue = new TestCatalogue(options.queries);
  const app = await buildShimApp({
    catalogue,
    clickhouse: options.clickhouse,
    config: { shim: shimConfig(options.env) },
    registry: new Registry(),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return { app, catalogue };
}

/** GET through inject; returns status and parsed JSON body. */
export async function get(app: FastifyInstance, url: string, headers: Record<string, string> = {}) {
  const res = await app.inject({ method: 'GET', url, headers });
  let body: Record<string, unknown> = {};
  try {
    body = res.json();
  } catch {
    body = { text: res.body };
  }
  return { status: res.statusCode, body, headers: res.headers };
}

