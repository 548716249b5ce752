import Fastify from 'fastify';

/**
 * The bare-Fastify baseline as its own process (pod-bench.ts): a readiness
 * route and the JSON of a cached shim answer, nothing else. Argument: port.
 */
const app = Fastify({ logger: false });
app.get('/readyz', async () => ({ status: 'ready' }));
app.get('/q/cached', async () => ({ value: 42, source: 'fresh', age_seconds: 0 }));
await app.listen({ host: '127.0.0.1', port: Number(process.argv[2]) });
