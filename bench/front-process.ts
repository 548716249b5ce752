import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { openClickHouse } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { createOtelGaugeTable, insertGaugePoints } from '../src/pressure/otel-table.js';
import { PRESSURE_METRIC } from '../src/pressure/rule.js';
import { startEngineFront } from '../src/clickhouse/http-front.js';
import { seedDue } from './due-query.js';

/**
 * A steady "ClickHouse server" for the one-connection figures (one-connection-bench.ts):
 * the embedded engine behind its HTTP front, in its OWN process, so the engine's work never
 * shares the event loop of the shim being measured. Seeds `<database>` with `hunts` hunts
 * (the due-query bench's fleet) and a pressure reading for `services` services, then prints
 * the front's URL on one line. Arguments: database hunts services [max_threads] (the engine's
 * threads per query, when the front is pinned to fewer cores than the machine has).
 *
 * Each query's engine time is kept (the front's `onEngineTime`); a line `engine-times` on
 * stdin is answered with one line on stdout, the JSON array of those since the last ask, in
 * the order the queries came (so a bench sending one query at a time can pair them up).
 */
const [database = 'bench_one', huntsArg = '40', servicesArg = '5000', maxThreadsArg] = process.argv.slice(2);
const path = mkdtempSync(join(tmpdir(), 'dfe-bench-front-'));
const engine = await openClickHouse(loadConfig({ DFE_EMBEDDED_PATH: path, DFE_CLICKHOUSE_BACKEND: 'embedded' }).clickhouse);
await seedDue(engine.client, database, Number(huntsArg));
await createOtelGaugeTable(engine.client, database);
const nowNs = BigInt(Date.now()) * 1_000_000n;
// Readings 10 minutes into the future: every pressure window of the run sees them.
const points = Array.from({ length: Number(servicesArg) }, (_, i) => ({ serviceName: `svc-${i}`, metricName: PRESSURE_METRIC, value: i % 100, timeUnixNs: nowNs + 600_000_000_000n }));
await insertGaugePoints(engine.client, database, points);
let engineTimes: number[] = [];
const settings = maxThreadsArg === undefined ? undefined : { max_threads: maxThreadsArg };
const front = await startEngineFront(engine, { onEngineTime: (ms) => engineTimes.push(ms), ...(settings ? { settings } : {}) });
console.log(front.url);
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== 'engine-times') return;
  console.log(JSON.stringify(engineTimes));
  engineTimes = [];
});
const stop = async () => {
  await front.close();
  await engine.close();
  rmSync(path, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
