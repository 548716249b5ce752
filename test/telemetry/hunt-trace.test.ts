import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchema } from '../../src/coordination/topology.js';
import { startRunner } from '../../src/runner/start.js';
import { startTelemetry, type Telemetry } from '../../src/telemetry/start.js';
import { openTestDatabase, queryRows, type TestDatabase } from '../helpers/clickhouse.js';
import { createOutputTable, outputHunt, runnerConfig, tempHuntsDir } from '../helpers/runner-fixtures.js';
import { otlpReceiver, SPAN_KIND, type OtlpReceiver } from './otlp-receiver.js';
import { capturingLogger } from '../helpers/logger.js';

/**
 * A hunt run is a span (docs/operations.md#traces): hunt id, fire, claim
 * outcome, run outcome and rows written, exported to a real OTLP/HTTP
 * receiver; the runner's log lines inside it carry its trace_id. The hunt
 * runs on the real ClickHouse of the tests.
 */
let db: TestDatabase;
let receiver: OtlpReceiver;
let telemetry: Telemetry;

beforeAll(async () => {
  receiver = await otlpReceiver();
  telemetry = await startTelemetry({
    serviceName: 'dfe-hunt-runner',
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_on' },
  });
  db = await openTestDatabase('trace');
  await applySchema(db.handle.client, db.database, { kind: 'single' });
  await createOutputTable(db);
});

afterAll(async () => {
  await telemetry?.shutdown();
  await receiver?.close();
  await db?.close();
});


/** A hunt whose one statement fails on the server (the table does not exist). */
function failingHunt(database: string): string {
  return ['schedule: {mode: rate, interval: 3600}', 'queries:', `  - "INSERT INTO \`${database}\`.missing_table SELECT {window_end:Int64}"`, ''].join('\n');
}

describe('a traced hunt run', () => {
  it('is a root span with hunt id, fire, claim outcome, outcome and the rows written that hunt_run records', async () => {
    const id = 'traced-hunt';
    const failing = 'traced-failing-hunt';
    const hunts = tempHuntsDir();
    const { logger: log, lines } = capturingLogger('debug');
    hunts.write(id, outputHunt(db.database, id, 3600));
    hunts.write(failing, failingHunt(db.database));
    const runner = await startRunner({ handle: db.handle, config: runnerConfig(db, hunts.dir), log, runnerId: 'traced', loop: false });
    try {
      expect((await runner.tick())?.started).toBe(2);
      await runner.idle();
    } finally {
      await runner.stop();
      hunts.remove();
    }
    await telemetry.flush();
    const [span] = await receiver.waitFor((s) => s.name === 'hunt run' && s.attributes['dfe.hunt.id'] === id);
    const [row] = await queryRows<{ fire: number; rows_written: number; status: string }>(
      db,
      `SELECT fire, rows_written, status FROM \`${db.database}\`.hunt_run WHERE hunt_id = {h:String}`,
      { h: id },
    );
    expect(span!.kind).toBe(SPAN_KIND.internal);
    expect(span!.parentSpanId).toBe('');
    expect(span!.statusCode).toBe(0);
    expect(span!.resource['service.name']).toBe('dfe-hunt-runner');
    expect(span!.attributes).toMatchObject({
      'dfe.hunt.fire': Number(row!.fire),
      'dfe.claim.outcome': 'won',
      'dfe.hunt.outcome': 'succeeded',
      'dfe.hunt.rows_written': Number(row!.rows_written),
    });
    // Its statement, a child span: the SQL with its window as bound parameters.
    const [statement] = await receiver.waitFor((s) => s.parentSpanId === span!.spanId);
    expect(statement!.name).toBe(`INSERT ${id}`);
    expect(statement!.kind).toBe(SPAN_KIND.client);
    expect(statement!.attributes).toMatchObject({ 'db.system.name': 'clickhouse', 'dfe.hunt.id': id, 'dfe.hunt.statement': 0 });
    expect(String(statement!.attributes['db.query.text'])).toContain('{window_end:Int64}');

    // The failed run: an error status, and the log line of its failure carries its trace.
    const [failed] = await receiver.waitFor((s) => s.name === 'hunt run' && s.attributes['dfe.hunt.id'] === failing);
    expect(failed!.statusCode).toBe(2);
    expect(failed!.attributes).toMatchObject({ 'dfe.claim.outcome': 'won', 'dfe.hunt.outcome': 'failed', 'dfe.hunt.rows_written': 0 });
    expect(failed!.attributes['dfe.hunt.error_code']).toBe(60);
    expect(failed!.traceId).not.toBe(span!.traceId);
    const [failedStatement] = await receiver.waitFor((s) => s.parentSpanId === failed!.spanId);
    expect(failedStatement!.statusCode).toBe(2);
    expect(failedStatement!.statusMessage).toBe('UNKNOWN_TABLE');
    const line = lines.find((l) => l.hunt === failing && l.msg === 'hunt run failed; the fire stays owed');
    expect(line).toMatchObject({ trace_id: failed!.traceId, span_id: failed!.spanId });
  });
});
