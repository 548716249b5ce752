import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { compiled, get, makeApp, type AppUnderTest } from '../helpers/shim.js';

/**
 * issue 9 item 14: /openapi.json is generated from the LIVE catalogue (each
 * query's route, params, answer schema) and follows a reload.
 */
let db: TestDatabase;
const apps: AppUnderTest[] = [];
beforeAll(async () => {
  db = await openTestDatabase('shim_openapi');
});
afterAll(async () => {
  for (const t of apps) await t.app.close();
  await db?.close();
});

type Doc = Record<string, unknown> & { paths: Record<string, Record<string, Record<string, unknown>>>; components: Record<string, Record<string, unknown>> };

/** The OpenAPI 3 structure a reader relies on: version, info, paths of operations with responses, resolvable $refs, parameters well-formed. */
function assertOpenApi3(doc: Doc): void {
  expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
  expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
  const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
  for (const ref of refs) {
    const path = ref.slice('"$ref":"#/'.length, -1).split('/');
    let node: unknown = doc;
    for (const part of path) node = (node as Record<string, unknown> | undefined)?.[part];
    expect({ ref, resolves: node !== undefined }).toEqual({ ref, resolves: true });
  }
  const ids = new Set<string>();
  for (const [route, item] of Object.entries(doc.paths)) {
    expect(route.startsWith('/')).toBe(true);
    for (const [method, op] of Object.entries(item)) {
      expect(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']).toContain(method);
      expect(Object.keys(op.responses as object).length).toBeGreaterThan(0);
      const id = op.operationId as string;
      expect(ids.has(id)).toBe(false);
      ids.add(id);
      for (const p of op.parameters as Record<string, unknown>[]) {
        expect(['query', 'header', 'path', 'cookie']).toContain(p.in);
        expect(typeof p.name).toBe('string');
        expect(p.schema).toBeTypeOf('object');
      }
    }
  }
  for (const scheme of Object.values(doc.components.securitySchemes ?? {})) {
    expect(['apiKey', 'http', 'oauth2', 'openIdConnect', 'mutualTLS']).toContain((scheme as { type: string }).type);
  }
}

describe('/openapi.json', () => {
  it('describes each live query: route, params, answer schema; follows a reload', async () => {
    const t = await makeApp({ queries: [compiled('depth', 'SELECT {queue:String}', { params: ['queue'] }), compiled('backlog', 'SELECT 1')], clickhouse: db.handle });
    apps.push(t);
    const first = (await get(t.app, '/openapi.json')).body as Doc;
    assertOpenApi3(first);
    expect(Object.keys(first.paths).sort()).toEqual(['/keda/hunt-backlog', '/q/backlog', '/q/depth']);
    const depth = first.paths['/q/depth']?.get as { parameters: { name: string; required: boolean }[]; responses: Record<string, unknown> };
    expect(depth.parameters.map((p) => [p.name, p.required])).toEqual([['queue', true], ['hold', false]]);
    expect(depth.responses['200']).toMatchObject({ content: { 'application/json': { schema: { $ref: '#/components/schemas/Answer' } } } });
    expect(first.components.schemas?.Answer).toMatchObject({ required: ['value', 'source', 'age_seconds'] });

    t.catalogue.apply([compiled('added', 'SELECT {a:String}, {b:String}', { params: ['a', 'b'] })]);
    const second = (await get(t.app, '/openapi.json')).body as Doc;
    assertOpenApi3(second);
    expect(Object.keys(second.paths)).toEqual(['/q/added']);
    expect((second.paths['/q/added']?.get as { parameters: { name: string }[] }).parameters.map((p) => p.name)).toEqual(['a', 'b', 'hold']);
  });

  it('names the configured auth (apiKey header and parameter) as security schemes, and stays open itself', async () => {
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const keyFile = join(mkdtempSync(join(tmpdir(), 'dfe-openapi-')), 'key');
    writeFileSync(keyFile, 'k');
    const t = await makeApp({
      queries: [compiled('one', 'SELECT 1')],
      clickhouse: db.handle,
      env: { DFE_KEDA_SHIM_AUTH_MODE: 'apiKey', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: keyFile, DFE_KEDA_SHIM_AUTH_API_KEY_HEADER: 'X-Key' },
    });
    apps.push(t);
    const res = await get(t.app, '/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body as Doc;
    assertOpenApi3(doc);
    expect(doc.components.securitySchemes).toEqual({
      apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-Key' },
      apiKeyQuery: { type: 'apiKey', in: 'query', name: 'api_key' },
    });
    expect(doc.paths['/q/one']?.get?.security).toEqual([{ apiKeyHeader: [] }, { apiKeyQuery: [] }]);
  });
});
