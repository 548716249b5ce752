import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalogue } from '../../src/catalogue/load.js';
import type { CompiledQuery } from '../../src/catalogue/types.js';
import { systemClock } from '../../src/clock.js';
import { quoteDatabase } from '../../src/clickhouse/identifiers.js';
import { renderPressureBatchSql } from '../../src/pressure/rule.js';
import { buildShimApp } from '../../src/shim/app.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';
import { get, shimConfig, TestCatalogue } from '../helpers/shim.js';
import { openGaugeFixture, type GaugeFixture } from '../helpers/gauge-fixture.js';
import { pressureVectors, type PressureVector } from '../helpers/pressure-vectors.js';

/**
 * The built-in pressure query's batch form against its one-by-one form, on
 * the real engine with OpenTelemetry gauge rows as the exporter writes them:
 * over the pressure rule's test vectors, a batch of every service answers
 * exactly what each service's own query answers. The one-by-one side is the
 * same catalogue with `batch: null` in an override: a query without a batch
 * form, served as before.
 */
let fx: GaugeFixture;
let dir: string;
let batched: CompiledQuery;
let oneByOne: CompiledQuery;
let vectors: PressureVector[];
const apps: FastifyInstance[] = [];

/** Compares answers, not speed: a deadline far past any load this machine sees, so no answer is held. */
const PATIENT = { deadlineMs: 60_000, timeoutSeconds: 120 };

async function appFor(query: CompiledQuery): Promise<FastifyInstance> {
  const app = await buildShimApp({ catalogue: new TestCatalogue([{ ...query, ...PATIENT }]), clickhouse: fx.db.handle, config: { shim: shimConfig() }, registry: new Registry() });
  apps.push(app);
  return app;
}

beforeAll(async () => {
  fx = await openGaugeFixture('batch_parity');
  vectors = pressureVectors('parity-', await fx.engineNowNs());
  await fx.write(vectors.flatMap((v) => v.points));
  dir = mkdtempSync(join(tmpdir(), 'dfe-parity-'));
  const overridePath = join(dir, 'override.yaml');
  writeFileSync(overridePath, 'queries:\n  pressure:\n    batch: null\n');
  const inputs = { dataDatabase: 'dfe', otelDatabase: fx.db.database, builtins: SHIM_CATALOGUE_BUILTINS, clock: systemClock };
  batched = (await loadCatalogue(inputs)).queries.get('pressure')!;
  oneByOne = (await loadCatalogue({ ...inputs, overridePath })).queries.get('pressure')!;
});
afterAll(async () => {
  for (const app of apps) await app.close();
  await fx?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('pressure: batched = one by one', () => {
  it('the built-in batch SQL is the rule module\'s, and the override without it has none', () => {
    expect(batched.batch?.sql.trim()).toBe(renderPressureBatchSql(quoteDatabase(fx.db.database)));
    expect(batched.batch).toMatchObject({ param: 'service', maxSize: 500 });
    expect(oneByOne.batch).toBeUndefined();
    expect(oneByOne.sql).toBe(batched.sql);
  });

  it('over the pressure test vectors, every service answers the same value, fresh, both ways', async () => {
    const batchApp = await appFor(batched);
    const singleApp = await appFor(oneByOne);
    const poll = (app: FastifyInstance) => Promise.all(vectors.map((v) => get(app, `/keda/pressure?service=${encodeURIComponent(v.service)}&hold=70`)));
    const batchedBefore = batchApp.shim.executor.queriesStarted;
    const viaBatch = await poll(batchApp);
    const viaSingle = await poll(singleApp);
    expect(viaBatch.map((a) => a.body)).toEqual(viaSingle.map((a) => a.body));
    expect(viaBatch.map((a) => a.body)).toEqual(vectors.map((v) => ({ value: v.expected, source: 'fresh', age_seconds: 0 })));
    // The batch side asked ClickHouse fewer times than there are services; the one-by-one side once per service.
    expect(batchApp.shim.executor.queriesStarted - batchedBefore).toBeLessThan(vectors.length);
    expect(singleApp.shim.executor.queriesStarted).toBe(vectors.length);
  });
});
