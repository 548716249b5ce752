import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import type { Logger } from '../../src/log.js';
import { startShim, type RunningShim } from '../../src/shim/start.js';
import { startTelemetry, type Telemetry } from '../../src/telemetry/start.js';
import { freePort } from '../helpers/ports.js';
import { otlpReceiver, type OtlpReceiver } from './otlp-receiver.js';
import { recordingFront, type RecordingFront } from './recording-front.js';

/**
 * A shim traced as its CLI starts it (OTEL_* settings, a span current only
 * synchronously), exporting to a real OTLP/HTTP receiver on loopback, with a
 * loopback front that records what the shim sends where ClickHouse would be.
 */
export interface TracedShim {
  readonly receiver: OtlpReceiver;
  readonly front: RecordingFront;
  readonly telemetry: Telemetry;
  readonly shim: RunningShim;
  close(): Promise<void>;
}

export async function startTracedShim(options: {
  /** The OTEL_* variables beside the receiver's endpoint. */
  readonly otel: Record<string, string>;
  /** The override catalogue (YAML). */
  readonly override: string;
  /** The value every answer of the front carries. */
  readonly answer: number;
  readonly logger?: Logger;
}): Promise<TracedShim> {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-traced-'));
  writeFileSync(join(dir, 'override.yaml'), options.override);
  const receiver = await otlpReceiver();
  const front = await recordingFront(options.answer);
  const telemetry = await startTelemetry({
    serviceName: 'dfe-keda-shim',
    context: 'sync',
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, ...options.otel },
  });
  const config = loadConfig({
    DFE_CLICKHOUSE_URL: front.url,
    DFE_KEDA_SHIM_HOST: '127.0.0.1',
    DFE_KEDA_SHIM_PORT: String(await freePort()),
    DFE_KEDA_SHIM_QUERY_CONFIG: join(dir, 'override.yaml'),
    LOG_LEVEL: 'silent',
  });
  const shim = await startShim({ config, ...(options.logger ? { logger: options.logger } : {}) });
  return {
    receiver,
    front,
    telemetry,
    shim,
    async close() {
      await shim.close();
      await telemetry.shutdown();
      await front.close();
      await receiver.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
