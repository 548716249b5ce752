import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../clock.js';
import { DfeError, describeError } from '../errors.js';
import { compileCatalogue, type CatalogueInputs } from './compile.js';
import { parseCatalogueText, type Layer } from './parse.js';
import type { Catalogue } from './types.js';

export interface LoadCatalogueOptions extends CatalogueInputs {
  /** The built-in catalogue. Default: the package's `queries/queries.yaml`. */
  readonly builtinPath?: string | undefined;
  /** The override (DFE_KEDA_SHIM_QUERY_CONFIG). Default: none. When set, it must exist. */
  readonly overridePath?: string | undefined;
  readonly clock: Clock;
}

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

async function readSource(path: string, role: 'built-in' | 'override'): Promise<SourceFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
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

/** Pure: files as read → a frozen Catalogue (or CATALOGUE_INVALID). */
export function buildCatalogue(files: CatalogueFiles, inputs: CatalogueInputs, loadedAtMs: number): Catalogue {
  const layers: Layer[] = [parseCatalogueText(files.builtin.text, files.builtin.path)];
  if (files.override) layers.push(parseCatalogueText(files.override.text, files.override.path));
  const queries = compileCatalogue(layers, inputs);
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
