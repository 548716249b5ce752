import { openClickHouse, type ClickHouseHandle } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../test/helpers/clickhouse-server.js';

/**
 * The ClickHouse the shim benches query: a real clickhouse-server process on
 * loopback when installed (HTTP, as in production), else the embedded engine.
 */
export type BenchTarget =
  | {
      readonly kind: 'server';
      readonly url: string;
      readonly description: string;
      readonly process: ClickHouseServerProcess;
      /** A client configured as the shim's (openClickHouse), for direct queries. */
      readonly direct: ClickHouseHandle;
      /** Finished queries whose text contains `marker`, from system.query_log (18.16: type is a UInt8, 2 = QueryFinish). */
      countQueries(marker: string): Promise<number>;
      close(): Promise<void>;
    }
  | {
      readonly kind: 'embedded';
      readonly description: string;
      readonly direct: ClickHouseHandle;
      close(): Promise<void>;
    };

export async function openBenchTarget(embedded: ClickHouseHandle): Promise<BenchTarget> {
  const found = clickHouseServerAvailability();
  if (found.kind === 'missing') {
    return { kind: 'embedded', description: `embedded engine (${found.reason})`, direct: embedded, close: async () => undefined };
  }
  const process = await startClickHouseServer({ logQueries: true });
  const direct = await openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: process.url }).clickhouse);
  return {
    kind: 'server',
    url: process.url,
    description: `clickhouse-server ${found.version} on loopback`,
    process,
    direct,
    async countQueries(marker: string) {
      await direct.client.command({ query: 'SYSTEM FLUSH LOGS' });
      const rs = await direct.client.query({
        // 18.16 has no query parameters; the marker is a fixed identifier from this file, never input.
        query: `SELECT count() AS n FROM system.query_log WHERE type = 2 AND query LIKE '%${marker.replace(/[^a-z_]/g, '')}%' AND query NOT LIKE '%query_log%'`,
        format: 'JSONEachRow',
      });
      const rows = await rs.json<{ n: string | number }>();
      return Number(rows[0]?.n ?? 0);
    },
    async close() {
      await direct.close();
      await process.dispose();
    },
  };
}
