import type { FastifyPluginAsync } from 'fastify';
import type { Catalogue } from '../../catalogue/types.js';
import { declaredParamDoc, HOLD_PARAM_DOC } from '../params.js';
import type { ShimContext, ShimRouteOptions } from '../context.js';
import { ANSWER_SCHEMA, ERROR_SCHEMA } from './schemas.js';

/**
 * `/openapi.json`: an OpenAPI 3.0 description generated from the LIVE
 * catalogue (each query's route, params and answer), rebuilt when a reload
 * swaps the catalogue. Open like /status: it names routes and parameter names, no values
 * or SQL.
 */
const KEDA_ROUTES: Readonly<Record<string, string>> = Object.freeze({ backlog: '/keda/hunt-backlog', pressure: '/keda/pressure' });

type Security = Record<string, unknown>;

function securityOf(ctx: ShimContext): { schemes: Security; requirement: Record<string, string[]>[] } {
  const auth = ctx.shim.auth;
  switch (auth.mode) {
    case 'none':
      return { schemes: {}, requirement: [] };
    case 'bearer':
      return { schemes: { bearer: { type: 'http', scheme: 'bearer' } }, requirement: [{ bearer: [] }] };
    case 'basic':
      return { schemes: { basic: { type: 'http', scheme: 'basic' } }, requirement: [{ basic: [] }] };
    case 'apiKey':
      return {
        schemes: {
          apiKeyHeader: { type: 'apiKey', in: 'header', name: auth.apiKeyHeader },
          apiKeyQuery: { type: 'apiKey', in: 'query', name: auth.apiKeyParam },
        },
        requirement: [{ apiKeyHeader: [] }, { apiKeyQuery: [] }],
      };
  }
}

function openApiDocument(catalogue: Catalogue, ctx: ShimContext): Record<string, unknown> {
  const security = securityOf(ctx);
  const paths: Record<string, unknown> = {};
  for (const query of [...catalogue.queries.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    const parameters = [...query.params.map(declaredParamDoc), HOLD_PARAM_DOC];
    const operation = {
      operationId: `query_${query.name.replace(/[^A-Za-z0-9_]/g, '_')}`,
      summary: `Query "${query.name}" (${query.metricType})`,
      parameters,
      ...(security.requirement.length > 0 ? { security: security.requirement } : {}),
      responses: {
        '200': { description: 'The value (fresh, or held through a ClickHouse failure)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Answer' } } } },
        '400': { description: 'A parameter is missing or invalid', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        ...(security.requirement.length > 0
          ? { '401': { description: 'Not authorised', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } }
          : {}),
        '503': { description: 'The last good value is older than max_stale_seconds', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
    };
    paths[`/q/${query.name}`] = { get: operation };
    const keda = KEDA_ROUTES[query.name];
    if (keda !== undefined) paths[keda] = { get: { ...operation, operationId: `${operation.operationId}_keda` } };
  }
  return {
    openapi: '3.0.3',
    info: { title: 'dfe-keda-shim', version: '1', description: 'KEDA metrics-api endpoints of the live query catalogue.' },
    paths,
    components: { schemas: { Answer: ANSWER_SCHEMA, Error: ERROR_SCHEMA }, securitySchemes: security.schemes },
  };
}

export const openApiRoutes: FastifyPluginAsync<ShimRouteOptions> = async (app, { ctx }) => {
  // Rebuilt only when the catalogue object changes (a reload swaps it whole).
  let cached: { catalogue: Catalogue; text: string } | undefined;
  app.get('/openapi.json', async (_request, reply) => {
    const catalogue = ctx.catalogue.current();
    if (cached?.catalogue !== catalogue) cached = { catalogue, text: JSON.stringify(openApiDocument(catalogue, ctx)) };
    return reply.type('application/json').header('cache-control', 'no-store').send(cached.text);
  });
};
