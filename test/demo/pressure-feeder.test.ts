import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { DEMO_PRESSURE_SERVICES, feederPoints, startPressureFeeder } from '../../src/demo/pressure-feeder.js';
import { openGaugeFixture, type GaugeFixture } from '../helpers/gauge-fixture.js';

describe('feederPoints (pure)', () => {
  it('writes one in-band point per pod, as an OTLP push names the pod', () => {
    const points = feederPoints(DEMO_PRESSURE_SERVICES, 1_900_000_000_123);
    expect(points).toHaveLength(DEMO_PRESSURE_SERVICES.reduce((n, s) => n + s.pods.length, 0));
    for (const p of points) {
      expect(p.value).toBeGreaterThanOrEqual(0);
      expect(p.value).toBeLessThanOrEqual(100);
      expect(p.resourceAttributes?.['service.instance.id']).toMatch(new RegExp(`^${p.serviceName}-\\d$`));
      expect(p.timeUnixNs).toBe(1_900_000_000_123_000_000n);
    }
  });

  it('runs pods of one service out of phase and moves over time', () => {
    const ingest = (ms: number) => feederPoints(DEMO_PRESSURE_SERVICES, ms).filter((p) => p.serviceName === 'demo-ingest');
    const [a, b] = ingest(1_900_000_000_000);
    expect(a!.value).not.toBe(b!.value);
    expect(ingest(1_900_000_060_000)[0]!.value).not.toBe(a!.value);
  });
});

describe('startPressureFeeder (real engine)', () => {
  let fx: GaugeFixture;
  beforeAll(async () => {
    fx = await openGaugeFixture('feeder');
  });
  afterAll(async () => fx?.close());

  it('makes the pressure query answer the hottest pod of each demo service', async () => {
    const clock = new ManualClock(Number((await fx.engineNowNs()) / 1_000_000n));
    const errors: unknown[] = [];
    const feeder = startPressureFeeder({ client: fx.db.handle.client, database: fx.db.database, clock, intervalMs: 60_000, onError: (e) => errors.push(e) });
    await feeder.stop();
    expect(errors).toEqual([]);
    const expected = feederPoints(DEMO_PRESSURE_SERVICES, clock.nowMs());
    for (const s of DEMO_PRESSURE_SERVICES) {
      const hottest = Math.max(...expected.filter((p) => p.serviceName === s.service).map((p) => p.value));
      expect(await fx.pressure(s.service)).toBeCloseTo(hottest, 9);
    }
  });

  it('reports a failed write and keeps ticking', async () => {
    const errors: unknown[] = [];
    const feeder = startPressureFeeder({
      client: fx.db.handle.client,
      database: `${fx.db.database}_missing`,
      intervalMs: 1,
      onError: (e) => errors.push(e),
    });
    await expect.poll(() => errors.length).toBeGreaterThanOrEqual(2);
    await feeder.stop();
  });
});
