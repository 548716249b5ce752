import Fastify from 'fastify';
import { openClickHouse } from '../src/clickhouse/client.js';
import { loadConfig } from '../src/config/load.js';
import { runCompact } from '../src/shim/clickhouse-query.js';
import { shimCatalogue } from './shim-catalogue.js';

/**
 * The floor of a fresh answer through any Node HTTP service, as its own process
 * (one-connection-bench.ts): a bare Fastify route that sends the catalogue's query
 * with the shim's own call (`runCompact`, the shim's client settings) and answers
 * the first value. No cache, no admission, no metrics, no validation beyond the
 * route. Arguments: port, ClickHouse URL, override catalogue path, data database.
 */
const [port = '0', url = '', overridePath = '', database = 'default'] = process.argv.slice(2);
const config = loadConfig({ DFE_CLICKHOUSE_URL: url, DFE_KEDA_SHIM_QUERY_CONFIG: overridePath, DFE_CLICKHOUSE_DATA_DATABASE: database });
const catalogue = await shimCatalogue(overridePath, config.clickhouse);
const clickhouse = await openClickHouse(config.clickhouse);
const app = Fastify({ logger: false });
app.get('/readyz', async () => ({ status: 'ready' }));
app.get<{ Params: { name: string }; Querystring: Record<string, string> }>('/q/:name', async (req, reply) => {
  const query = catalogue.queries.get(req.params.name);
  if (query === undefined) return reply.code(404).send({ error: 'no such query' });
  const answer = await runCompact(clickhouse.client, query, req.query, new AbortController().signal);
  const data = (JSON.parse(answer.text) as { data: unknown[][] }).data;
  return { value: data[0]?.[0] ?? null, source: 'fresh' };
});
await app.listen({ host: '127.0.0.1', port: Number(port) });
