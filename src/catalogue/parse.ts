import YAML from 'yaml';
import type { z } from 'zod';
import { catalogueInvalid } from './errors.js';
import { QUERY_NAME, RAW_QUERY_KEYS, rawQuerySchema, type RawQuery } from './schema.js';

/** One parsed catalogue file: the built-in one or the override. */
export interface Layer {
  readonly file: string;
  readonly queries: ReadonlyMap<string, RawQuery>;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * YAML text → a Layer, or a CATALOGUE_INVALID error naming the file, query and
 * key. An empty document (or `queries:` with nothing under it) is a file that
 * defines no queries: an empty override leaves the built-ins as they are.
 */
export function parseCatalogueText(text: string, file: string): Layer {
  let doc: unknown;
  try {
    // uniqueKeys (the default) makes a query or key defined twice a syntax error.
    // logLevel 'error': the library would print warnings to stderr, outside pino; errors still throw.
    doc = YAML.parse(text, { prettyErrors: true, logLevel: 'error' });
  } catch (err) {
    const first = (err instanceof Error ? (err.message.split('\n')[0] ?? '') : String(err)).replace(/:\s*$/, '');
    throw catalogueInvalid({ file, problem: `is not valid YAML: ${first}` }, err);
  }
  if (doc === null || doc === undefined) return { file, queries: new Map() };
  if (!isMap(doc)) throw catalogueInvalid({ file, problem: 'must be a mapping with a top-level "queries" key' });
  for (const key of Object.keys(doc)) {
    if (key !== 'queries') throw catalogueInvalid({ file, key, problem: 'is not a known top-level key (only "queries")' });
  }
  const rawQueries = doc['queries'] ?? {};
  if (!isMap(rawQueries)) throw catalogueInvalid({ file, key: 'queries', value: rawQueries, problem: 'must be a mapping of query name to query' });

  const queries = new Map<string, RawQuery>();
  for (const [name, body] of Object.entries(rawQueries)) {
    if (!QUERY_NAME.test(name)) throw catalogueInvalid({ file, query: name, problem: 'is not a valid query name ([A-Za-z0-9_-]+)' });
    if (!isMap(body)) throw catalogueInvalid({ file, query: name, value: body, problem: 'must be a mapping of keys' });
    const parsed = rawQuerySchema.safeParse(body);
    if (!parsed.success) throw issueError(file, name, body, parsed.error.issues);
    queries.set(name, parsed.data);
  }
  return { file, queries };
}

function issueError(file: string, query: string, body: Record<string, unknown>, issues: readonly z.core.$ZodIssue[]) {
  // Report the first problem; the operator fixes it and sees the next one.
  const issue = issues[0];
  if (issue === undefined) return catalogueInvalid({ file, query, problem: 'is invalid' });
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '?';
    return catalogueInvalid({ file, query, key, value: body[key], problem: `is not a known key (known: ${RAW_QUERY_KEYS.join(', ')})` });
  }
  const key = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
  let value: unknown = body;
  for (const p of issue.path) value = isMap(value) || Array.isArray(value) ? (value as Record<PropertyKey, unknown>)[p] : undefined;
  // A bad bind NAME is a record-key issue: show the name, not its value.
  if (issue.code === 'invalid_key') {
    const name = issue.path[issue.path.length - 1];
    return catalogueInvalid({ file, query, key, value: name, problem: 'is not a valid bind name (an identifier: [A-Za-z_][A-Za-z0-9_]*)' });
  }
  return catalogueInvalid({ file, query, key, value, problem: issue.message });
}
