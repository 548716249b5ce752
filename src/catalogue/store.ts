import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { describeError, isDfeError } from '../errors.js';
import { isEmptyCatalogueError } from './parse.js';
import { buildCatalogue, readCatalogueFiles, type CatalogueFiles, type LoadCatalogueOptions } from './load.js';
import type { Catalogue, CatalogueEvent, CatalogueProvider } from './types.js';

export interface CatalogueStoreOptions extends LoadCatalogueOptions {
  /** How often the files' content hash is compared (ConfigMap updates may not fire a watch event). Default 2000 ms. */
  readonly reloadIntervalMs?: number;
  /** Quiet time after a watch event before checking, so a burst of renames is read once. Default 100 ms. */
  readonly watchDebounceMs?: number;
}

export type ReloadResult = 'unchanged' | 'applied' | 'rejected';
type State = 'stopped' | 'started';

/**
 * The live catalogue with hot reload (docs/catalogue.md#hot-reload). A Kubernetes ConfigMap update
 * swaps a `..data` symlink in the mounted directory, replacing the file under
 * a path that never changes: so the override's DIRECTORY is watched, and the
 * content hash is compared on an interval as a backstop (watch events are not
 * guaranteed on every filesystem). Either triggers `reload()`; SIGHUP handling
 * is the server's, which calls `reload()` too.
 *
 * A reload parses and compiles fully before it swaps; a bad catalogue (invalid
 * YAML, invalid key, file gone, too large, EMPTY — a writer that truncates then
 * writes leaves a 0-byte file for a moment) is rejected and the old one keeps
 * serving, cache and all. The YAML is parsed in a worker thread, so a reload
 * never holds the event loop that answers KEDA.
 * Reloads are serialized, so two triggers never interleave.
 */
export class CatalogueStore implements CatalogueProvider {
  private catalogue: Catalogue;
  private hashes: string;
  /** Content of the last rejected files, so the interval does not re-reject (and re-log) the same bad file. */
  private rejectedHashes: string | undefined;
  private readonly listeners = new Set<(event: CatalogueEvent) => void>();
  private queue: Promise<unknown> = Promise.resolve();
  private state: State = 'stopped';
  private watcher: FSWatcher | undefined;
  private interval: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private pendingCheck: Promise<ReloadResult> | undefined;

  private constructor(
    private readonly options: CatalogueStoreOptions,
    files: CatalogueFiles,
    catalogue: Catalogue,
  ) {
    this.catalogue = catalogue;
    this.hashes = hashesOf(files);
  }

  /** Loads the catalogue once; throws CATALOGUE_INVALID / CATALOGUE_MISSING (startup exits on it). */
  static async open(options: CatalogueStoreOptions): Promise<CatalogueStore> {
    const files = await readCatalogueFiles(options);
    return new CatalogueStore(options, files, await buildCatalogue(files, options, options.clock.nowMs()));
  }

  current(): Catalogue {
    return this.catalogue;
  }

  subscribe(listener: (event: CatalogueEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Re-reads both files; swaps in the new catalogue if its content changed and is valid. */
  reload(): Promise<ReloadResult> {
    return this.enqueue(() => this.reloadNow(true));
  }

  /** Starts watching and polling (idempotent). Timers and watcher never keep the process alive. */
  start(): void {
    if (this.state === 'started') return;
    this.state = 'started';
    const intervalMs = this.options.reloadIntervalMs ?? 2000;
    this.interval = setInterval(() => void this.check(), intervalMs);
    this.interval.unref();
    if (this.options.overridePath !== undefined) this.watchDirectory(dirname(this.options.overridePath));
  }

  stop(): void {
    this.state = 'stopped';
    clearInterval(this.interval);
    clearTimeout(this.debounce);
    this.watcher?.close();
    this.interval = this.debounce = this.watcher = undefined;
  }

  private watchDirectory(dir: string): void {
    try {
      this.watcher = watch(dir, { persistent: false }, () => {
        clearTimeout(this.debounce);
        this.debounce = setTimeout(() => void this.check(), this.options.watchDebounceMs ?? 100);
        this.debounce.unref();
      });
      // A vanished directory ends the watch; the interval keeps checking.
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch {
      this.watcher = undefined;
    }
  }

  /** A trigger (watch event or interval): reload only when the content differs from what is served or was rejected. */
  private check(): Promise<ReloadResult> {
    // One queued check is enough: a burst of events (or an interval shorter than a parse) never piles up.
    if (this.pendingCheck !== undefined) return this.pendingCheck;
    const run = this.enqueue(() => {
      this.pendingCheck = undefined;
      return this.reloadNow(false);
    });
    this.pendingCheck = run;
    return run;
  }

  private enqueue(task: () => Promise<ReloadResult>): Promise<ReloadResult> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async reloadNow(explicit: boolean): Promise<ReloadResult> {
    let files: CatalogueFiles;
    try {
      files = await readCatalogueFiles(this.options);
    } catch (err) {
      return this.reject(err, fileOf(err) ?? this.options.overridePath, `unreadable:${describeError(err)}`, explicit);
    }
    const hashes = hashesOf(files);
    if (hashes === this.hashes) {
      this.rejectedHashes = undefined;
      return 'unchanged';
    }
    // The same bad content as last time: not parsed again (the interval would re-parse it every tick).
    if (!explicit && hashes === this.rejectedHashes) return 'rejected';
    let next: Catalogue;
    try {
      next = await buildCatalogue(files, this.options, this.options.clock.nowMs());
    } catch (err) {
      return this.reject(err, fileOf(err) ?? files.override?.path ?? files.builtin.path, hashes, explicit);
    }
    const previous = this.catalogue;
    this.catalogue = next;
    this.hashes = hashes;
    this.rejectedHashes = undefined;
    this.emit({ kind: 'applied', catalogue: next, previous, ...diffCatalogues(previous, next) });
    return 'applied';
  }

  private reject(err: unknown, file: string | undefined, hashes: string, explicit: boolean): ReloadResult {
    // The same bad content is reported once per change; an explicit reload (SIGHUP) always reports.
    if (!explicit && hashes === this.rejectedHashes) return 'rejected';
    this.rejectedHashes = hashes;
    const error = err instanceof Error ? err : new Error(String(err));
    this.emit({ kind: 'rejected', error, file, empty: isEmptyCatalogueError(err) });
    return 'rejected';
  }

  private emit(event: CatalogueEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A failing listener must not stop the others or the reload.
      }
    }
  }
}

function fileOf(err: unknown): string | undefined {
  return isDfeError(err) ? err.file : undefined;
}

function hashesOf(files: CatalogueFiles): string {
  return `${files.builtin.hash}:${files.override?.hash ?? '-'}`;
}

/** Names whose cache entries must go: changed (new or different fingerprint) and removed. */
export function diffCatalogues(previous: Catalogue, next: Catalogue): { changed: string[]; removed: string[] } {
  const changed = [...next.queries.values()].filter((q) => previous.queries.get(q.name)?.fingerprint !== q.fingerprint).map((q) => q.name);
  const removed = [...previous.queries.keys()].filter((name) => !next.queries.has(name));
  return { changed, removed };
}
