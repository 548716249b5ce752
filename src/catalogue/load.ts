import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../clock.js';
import { DfeError, describeError } from '../errors.js';
import { compileCatalogue, type CatalogueInputs } from './compile.js';
import { parseCatalogueTextOffThread, type Layer, type ParseLimits } from './parse.js';
import type { Catalogue } from './types.js';

export interface LoadCatalogueOptions extends CatalogueInputs {
  /** The built-in catalogue. Default: the package's `queries/queries.yaml`. */
  readonly builtinPath?: string | undefined;
  /** The override (DFE_KEDA_SHIM_QUERY_CONFIG). Default: none. When set, it must exist. */
  readonly overridePath?: string | undefined;
  readonly clock: Clock;
  /** Queries one file may define (DFE_KEDA_SHIM_MAX_QUERIES). Default 1000. */
  readonly maxQueries?: number | undefined;
}

/** What a ConfigMap can hold: a larger catalogue file is rejected before it is read. */
export const MAX_CATALOGUE_BYTES = 1024 * 1024;
const READ_CHUNK = 64 * 1024;

/** One file as read: its text and a hash of it, so a reload can tell whether anything changed. */
export interface SourceFile {
  readonly path: string;
  readonly text: string;
  readonly hash: string;
}

export interface CatalogueFiles {
  readonly builtin: SourceFile;
  readonly override: SourceFile | undefined;
}

/**
 * `queries/queries.yaml` of this package: found by walking up from this module,
 * which sits at src/catalogue/ when run from source and dist/src/catalogue/
 * when built.
 */
export function defaultBuiltinPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'queries', 'queries.yaml');
    if (existsSync(candidate) && existsSync(join(dir, 'package.json'))) return candidate;
    dir = dirname(dir);
  }
  return join(process.cwd(), 'queries', 'queries.yaml');
}

export function contentHash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function tooLarge(path: string, role: string, size: string): DfeError {
  return new DfeError(
    'CATALOGUE_INVALID',
    `${path}: the ${role} query catalogue is ${size} bytes, more than ${MAX_CATALOGUE_BYTES} (1 MiB, what a ConfigMap holds); not read`,
    { file: path },
  );
}

/**
 * Reads one catalogue file, bounded: its size is checked (stat) before any of
 * it is read, and the read stops past the limit (the file may grow between the
 * two), so a huge file costs a stat, never a buffer of its size.
 */
async function readBounded(path: string, role: string): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new DfeError('CATALOGUE_INVALID', `${path}: the ${role} query catalogue is not a regular file`, { file: path });
    if (stats.size > MAX_CATALOGUE_BYTES) throw tooLarge(path, role, String(stats.size));
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const { bytesRead, buffer } = await handle.read({ buffer: Buffer.alloc(READ_CHUNK) });
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > MAX_CATALOGUE_BYTES) throw tooLarge(path, role, `more than ${MAX_CATALOGUE_BYTES}`);
      chunks.push(buffer.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, total).toString('utf8');
  } finally {
    await handle.close();
  }
}

async function readSource(path: string, role: 'built-in' | 'override'): Promise<SourceFile> {
  let text: string;
  try {
    text = await readBounded(path, role);
  } catch (err) {
    if (err instanceof DfeError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      const key = role === 'override' ? 'DFE_KEDA_SHIM_QUERY_CONFIG' : 'DFE_KEDA_SHIM_BUILTIN_QUERIES';
      throw new DfeError('CATALOGUE_MISSING', `${path}: the ${role} query catalogue does not exist (${key})`, { file: path, key, cause: err });
    }
    throw new DfeError('CATALOGUE_INVALID', `${path}: cannot read the ${role} query catalogue: ${describeError(err)}`, { file: path, cause: err });
  }
  return { path, text, hash: contentHash(text) };
}

export async function readCatalogueFiles(options: Pick<LoadCatalogueOptions, 'builtinPath' | 'overridePath'>): Promise<CatalogueFiles> {
  const builtin = await readSource(options.builtinPath ?? defaultBuiltinPath(), 'built-in');
  const override = options.overridePath === undefined ? undefined : await readSource(options.overridePath, 'override');
  return { builtin, override };
}

/**
 * Files as read → a frozen Catalogue (or CATALOGUE_INVALID). The YAML is
 * parsed in a worker thread (parse.ts), the rest — validation, merge,
 * compile — is bounded by the query cap and runs here.
 */
export async function buildCatalogue(
  files: CatalogueFiles,
  options: CatalogueInputs & ParseLimits,
  loadedAtMs: number,
): Promise<Catalogue> {
  const limits = { maxQueries: options.maxQueries, timeoutMs: options.timeoutMs };
  const layers: Layer[] = [await parseCatalogueTextOffThread(files.builtin.text, files.builtin.path, limits)];
  if (files.override) layers.push(await parseCatalogueTextOffThread(files.override.text, files.override.path, limits));
  const queries = compileCatalogue(layers, options);
  return Object.freeze({
    queries,
    source: Object.freeze({ builtinPath: files.builtin.path, overridePath: files.override?.path, overrideHash: files.override?.hash }),
    loadedAtMs,
  });
}

/** Reads, merges, validates and compiles the catalogue once (startup). */
export async function loadCatalogue(options: LoadCatalogueOptions): Promise<Catalogue> {
  const files = await readCatalogueFiles(options);
  return buildCatalogue(files, options, options.clock.nowMs());
}
