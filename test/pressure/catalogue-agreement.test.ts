import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { quoteDatabase } from '../../src/clickhouse/identifiers.js';
import { loadCatalogue } from '../../src/catalogue/load.js';
import type { CompiledQuery } from '../../src/catalogue/types.js';
import { PRESSURE_MAX, PRESSURE_MIN, PRESSURE_WINDOW_SECONDS, renderPressureSql } from '../../src/pressure/rule.js';
import { queryRows } from '../helpers/clickhouse.js';
import { agedNs, openGaugeFixture, otlpPoint, type GaugeFixture } from '../helpers/gauge-fixture.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../src/shim/catalogue-builtins.js';

/**
 * One place per fact: the built-in `pressure` query of queries/queries.yaml,
 * compiled by the catalogue, is exactly the rule's SQL — so what the rule's
 * tests prove is what the shim runs.
 */
let fx: GaugeFixture;
let pressure: CompiledQuery;

beforeAll(async () => {
  fx = await openGaugeFixture('agreement');
  const catalogue = await loadCatalogue({ dataDatabase: 'dfe', otelDatabase: fx.db.database, builtins: SHIM_CATALOGUE_BUILTINS, clock: systemClock });
  const q = catalogue.queries.get('pressure');
  if (!q) throw new Error('the built-in catalogue has no `pressure` query');
  pressure = q;
});
afterAll(async () => fx?.close());

describe('built-in pressure query = the pressure rule', () => {
  it('compiles to the rule SQL, on the otel database', () => {
    expect(pressure.databaseName).toBe(fx.db.database);
    expect(pressure.sql.trim()).toBe(renderPressureSql(quoteDatabase(fx.db.database)));
  });

  it('declares what docs/pressure.md says the built-in declares', () => {
    expect(pressure).toMatchObject({
      database: 'otel',
      params: ['service'],
      binds: { window_seconds: PRESSURE_WINDOW_SECONDS },
      clampMin: PRESSURE_MIN,
      clampMax: PRESSURE_MAX,
      coldHold: 0,
      metricType: 'Value',
    });
  });

  it('runs on the real engine with the binds the catalogue sends', async () => {
    const now = await fx.engineNowNs();
    await fx.write([
      otlpPoint('agree', 'busy', 'app_scaling_pressure', 90, agedNs(now, 10)),
      otlpPoint('agree', 'idle', 'app_scaling_pressure', 10, agedNs(now, 10)),
    ]);
    const rows = await queryRows<Record<string, unknown>>(fx.db, pressure.sql, { ...pressure.binds, service: 'agree' });
    expect(rows).toHaveLength(1);
    expect(Object.values(rows[0]!)[pressure.resultField as number]).toBe(90);
  });
});
