import * as YAML from 'yaml';
import type { z } from 'zod';
import { catalogueInvalid } from './errors.js';
import { readYamlTextOffThread } from './off-thread.js';
import { readYamlText, type YamlOutcome } from './yaml-text.js';
import { BATCH_KEYS, QUERY_NAME, RAW_QUERY_KEYS, rawQuerySchema, type RawQuery } from './schema.js';

/** One parsed catalogue file: the built-in one or the override. */
export interface Layer {
  readonly file: string;
  readonly queries: ReadonlyMap<string, RawQuery>;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Queries one catalogue file may define, unless DFE_KEDA_SHIM_MAX_QUERIES says otherwise (docs/catalogue.md, "Limits"). */
export const DEFAULT_MAX_QUERIES = 1000;

export interface ParseLimits {
  readonly maxQueries?: number | undefined;
  /** Off-thread only: a parse that takes longer is abandoned. Default 10 000 ms. */
  readonly timeoutMs?: number | undefined;
}

function fromOutcome(outcome: YamlOutcome, file: string): Layer {
  if (!outcome.ok) throw catalogueInvalid({ file, ...(outcome.key === undefined ? {} : { key: outcome.key }), problem: outcome.problem });
  return layerOf(outcome.value, file);
}

/**
 * YAML text → a Layer, or a CATALOGUE_INVALID error naming the file, query and
 * key. Synchronous, on the calling thread: for tests and tools. The shim loads
 * through parseCatalogueTextOffThread.
 */
export function parseCatalogueText(text: string, file: string, limits: ParseLimits = {}): Layer {
  return fromOutcome(readYamlText(YAML, text, limits.maxQueries ?? DEFAULT_MAX_QUERIES), file);
}

/** parseCatalogueText with the YAML step in a worker thread: the event loop stays free. */
export async function parseCatalogueTextOffThread(text: string, file: string, limits: ParseLimits = {}): Promise<Layer> {
  const outcome = await readYamlTextOffThread(text, { maxQueries: limits.maxQueries ?? DEFAULT_MAX_QUERIES, timeoutMs: limits.timeoutMs ?? 10_000 });
  return fromOutcome(outcome, file);
}

/** Says a file means no queries on purpose: `queries: {}`. */
const EMPTY_HINT = 'write "queries: {}" for a catalogue with no queries';

const emptyErrors = new WeakSet<Error>();

/** The file had no content (0 bytes, blank, comments only, or `queries:` alone): likely a write in progress. */
export function isEmptyCatalogueError(err: unknown): boolean {
  return err instanceof Error && emptyErrors.has(err);
}

function emptyFile(file: string, key: string | undefined, problem: string): Error {
  const err = catalogueInvalid({ file, ...(key === undefined ? {} : { key }), problem: `${problem}: ${EMPTY_HINT}` });
  emptyErrors.add(err);
  return err;
}

/**
 * A parsed document → a Layer. A document with no content (a 0-byte,
 * blank or comment-only file) or `queries:` with nothing under it is NOT a
 * catalogue: it is what a writer that truncates then writes leaves for a
 * moment, and taking it would drop every override query. It is rejected (a
 * reload keeps the old catalogue); an intentional empty file says `queries: {}`.
 */
function layerOf(doc: unknown, file: string): Layer {
  if (doc === null || doc === undefined) {
    throw emptyFile(file, undefined, 'has no content (an empty file is taken for a write in progress, not a catalogue)');
  }
  if (!isMap(doc)) throw catalogueInvalid({ file, problem: 'must be a mapping with a top-level "queries" key' });
  for (const key of Object.keys(doc)) {
    if (key !== 'queries') throw catalogueInvalid({ file, key, problem: 'is not a known top-level key (only "queries")' });
  }
  const rawQueries = doc['queries'];
  if (rawQueries === null || rawQueries === undefined) {
    throw emptyFile(file, 'queries', 'is empty (taken for a write in progress, not a catalogue)');
  }
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
  if (issue.code === 'unrecognized_keys' && issue.path[0] === 'batch') {
    const inner = issue.keys[0] ?? '?';
    const block = body['batch'];
    const value = isMap(block) ? block[inner] : undefined;
    return catalogueInvalid({ file, query, key: `batch.${inner}`, value, problem: `is not a known key of batch (known: ${BATCH_KEYS.join(', ')})` });
  }
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
