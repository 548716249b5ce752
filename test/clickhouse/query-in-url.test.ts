import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClickHouse, type ClickHouseHandle } from '../../src/clickhouse/client.js';
import { startEngineFront, type EngineFront } from '../../src/clickhouse/http-front.js';
import { MAX_URL_QUERY_CHARS } from '../../src/clickhouse/query-in-url.js';
import { loadConfig } from '../../src/config/load.js';
import { clickHouseServerAvailability, startClickHouseServer, type ClickHouseServerProcess } from '../helpers/clickhouse-server.js';
import { openTestDatabase, type TestDatabase } from '../helpers/clickhouse.js';
import { needs } from '../helpers/requirement.js';
import { recordingFront, type RecordingFront } from '../telemetry/recording-front.js';

/**
 * A server client sends a short statement's SQL in the URL with an empty body
 * (src/clickhouse/query-in-url.ts): what goes over the socket (a recording
 * socket), and that a real engine behind an HTTP front, and Debian's
 * clickhouse-server 18.16, answer it the same.
 */
const open = (url: string): Promise<ClickHouseHandle> => openClickHouse(loadConfig({ DFE_CLICKHOUSE_URL: url }).clickhouse);
const text = async (handle: ClickHouseHandle, query: string, params: Record<string, unknown> = {}): Promise<string> => {
  const { stream } = await handle.client.exec({ query, query_params: params });
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};
/** A statement of exactly `length` characters: a comment pads it. */
const padded = (sql: string, length: number): string => `${sql} /*${'x'.repeat(length - sql.length - 5)}*/`;

describe('what a server client sends', () => {
  let front: RecordingFront;
  let handle: ClickHouseHandle;
  beforeAll(async () => {
    front = await recordingFront(3);
    handle = await open(front.url);
  });
  afterAll(async () => {
    await handle?.close();
    await front?.close();
  });

  it('a statement up to the limit: its SQL in the URL beside its parameters and settings, an empty body', async () => {
    const sql = padded('SELECT {n:UInt8} AS v FORMAT JSONCompact', MAX_URL_QUERY_CHARS);
    expect(sql).toHaveLength(MAX_URL_QUERY_CHARS);
    await text(handle, sql, { n: 1 });
    const [sent] = front.requests.splice(0);
    const url = new URL(sent?.url ?? '', 'http://front');
    expect(url.searchParams.get('query')).toBe(sql);
    expect(url.searchParams.get('param_n')).toBe('1');
    expect(sent?.body).toBe('');
  });

  it('a longer statement: its SQL in the body, none in the URL', async () => {
    const sql = padded('SELECT {n:UInt8} AS v FORMAT JSONCompact', MAX_URL_QUERY_CHARS + 1);
    await text(handle, sql, { n: 1 });
    const [sent] = front.requests.splice(0);
    const url = new URL(sent?.url ?? '', 'http://front');
    expect(url.searchParams.has('query')).toBe(false);
    expect(url.searchParams.get('param_n')).toBe('1');
    expect(sent?.body).toBe(sql);
  });

  it('an exec with values keeps them as its body', async () => {
    await handle.client.exec({ query: 'INSERT INTO t FORMAT TSV', values: Readable.from(['1\n2\n']) });
    const [sent] = front.requests.splice(0);
    expect(new URL(sent?.url ?? '', 'http://front').searchParams.get('query')).toBe('INSERT INTO t FORMAT TSV');
    expect(sent?.body).toBe('1\n2\n');
  });
});

describe('a real engine behind an HTTP front', () => {
  let db: TestDatabase;
  let front: EngineFront;
  let handle: ClickHouseHandle;
  beforeAll(async () => {
    db = await openTestDatabase('query_in_url');
    front = await startEngineFront(db.handle);
    handle = await open(front.url);
  });
  afterAll(async () => {
    await handle?.close();
    await front?.close();
    await db?.close();
  });

  it('answers a statement in the URL and one in the body alike', async () => {
    const sql = 'SELECT {n:UInt8} + 1 AS v FORMAT JSONCompact';
    const inUrl = JSON.parse(await text(handle, sql, { n: 4 })) as { data: unknown[][] };
    const inBody = JSON.parse(await text(handle, padded(sql, MAX_URL_QUERY_CHARS + 10), { n: 4 })) as { data: unknown[][] };
    expect(inUrl.data).toEqual([[5]]);
    expect(inBody.data).toEqual([[5]]);
  });
});

const found = clickHouseServerAvailability();
const gate = needs(found.kind === 'missing' ? found.reason : undefined);

gate.describe('ClickHouse 18.16 takes the SQL from the URL', () => {
  let server: ClickHouseServerProcess;
  let handle: ClickHouseHandle;
  beforeAll(async () => {
    server = await startClickHouseServer();
    handle = await open(server.url);
  }, 60_000);
  afterAll(async () => {
    await handle?.close();
    await server?.dispose();
  });

  gate.it('runs a statement whose SQL is in the URL and whose body is empty', async () => {
    const answer = JSON.parse(await text(handle, 'SELECT 40 + 2 AS v FORMAT JSONCompact')) as { data: unknown[][] };
    expect(answer.data).toEqual([[42]]);
  });
});
