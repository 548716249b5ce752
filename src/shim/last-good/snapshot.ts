import { mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../clock.js';
import { describeError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { decodeSnapshot, encodeSnapshot, keepLive } from './snapshot-format.js';
import type { LastGoodStore } from './store.js';

/**
 * The last-good snapshot on local disk (docs/failsafe.md#snapshot-and-peers):
 * read once at start, written off the request path (every interval while
 * the cache changed, and at close), as write-then-rename so a reader never
 * sees half a file. A bad file is logged with its name and ignored.
 */
export const SNAPSHOT_FILE = 'last-good.json';

/** A snapshot larger than this is not read (a 10 000-key cache is about 1 MiB). */
export const MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;

export interface SnapshotOptions {
  readonly dir: string;
  readonly intervalMs: number;
  readonly store: LastGoodStore;
  readonly clock: Clock;
  readonly logger: Logger;
}

export class LastGoodSnapshot {
  readonly path: string;
  private timer: NodeJS.Timeout | undefined;
  private writtenVersion = -1;
  private writing: Promise<void> | undefined;

  constructor(private readonly options: SnapshotOptions) {
    this.path = join(options.dir, SNAPSHOT_FILE);
  }

  /**
   * Loads the file into the store, keeping entries whose query is live with
   * the same fingerprint. Never throws: a missing file is a first start, a
   * bad one is logged and ignored. Returns how many entries were restored.
   */
  async restore(fingerprintOf: (query: string) => string | undefined): Promise<number> {
    const { logger, store } = this.options;
    let text: string;
    try {
      const size = (await stat(this.path)).size;
      if (size > MAX_SNAPSHOT_BYTES) throw new Error(`${size} bytes, more than the ${MAX_SNAPSHOT_BYTES} read at most`);
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      logger.warn({ file: this.path, err: describeError(err) }, 'last-good snapshot unreadable; starting with an empty cache');
      return 0;
    }
    let restored = 0;
    try {
      const { kept, droppedGone, droppedChanged } = keepLive(decodeSnapshot(text), fingerprintOf);
      // The file lists oldest-used first; only the newest maxKeys survive the LRU bound.
      for (const { key, entry } of kept) if (store.offer(key, entry)) restored += 1;
      this.writtenVersion = store.version;
      logger.info({ file: this.path, restored, droppedGone, droppedChanged }, 'last-good snapshot restored');
    } catch (err) {
      logger.warn({ file: this.path, err: describeError(err) }, 'last-good snapshot is corrupt; ignored, starting with an empty cache');
    }
    return restored;
  }

  /** Writes every `intervalMs` while the cache changed; the timer does not hold the process open. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.write(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and writes a last time (graceful close). */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.write();
  }

  /** One write if the store changed since the last; concurrent calls share it. Never throws. */
  write(): Promise<void> {
    this.writing ??= this.writeNow().finally(() => {
      this.writing = undefined;
    });
    return this.writing;
  }

  private async writeNow(): Promise<void> {
    const { store, clock, logger, dir } = this.options;
    const version = store.version;
    if (version === this.writtenVersion) return;
    const tmp = `${this.path}.${process.pid}.tmp`;
    try {
      await mkdir(dir, { recursive: true });
      const text = encodeSnapshot(store.oldestFirst(), clock.nowMs());
      const handle = await open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(text, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(tmp, this.path);
      this.writtenVersion = version;
    } catch (err) {
      logger.warn({ file: this.path, err: describeError(err) }, 'last-good snapshot not written; the previous one stays');
      await unlink(tmp).catch(() => undefined);
    }
  }
}
