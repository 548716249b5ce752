import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { readYamlText, type YamlOutcome } from './yaml-text.js';

/**
 * Runs readYamlText in a worker thread, so a large or slow catalogue never
 * holds the event loop that answers KEDA (docs/catalogue.md, "Limits"). A
 * worker that runs past `timeoutMs` or past its heap cap is terminated. What
 * comes back is the plain value (structured clone keeps `.inf`, `.nan` and own
 * `__proto__` keys as they were); zod validation of it is cheap and stays on
 * the main thread.
 *
 * The worker's code is readYamlText's own source (it is self-contained), run
 * with the `yaml` package resolved from here: it works the same from the
 * TypeScript sources (tests) and from the built JavaScript.
 */
export interface OffThreadOptions {
  readonly maxQueries: number;
  /** A parse that takes longer is abandoned (the worker is terminated). */
  readonly timeoutMs: number;
}

const YAML_PATH = createRequire(import.meta.url).resolve('yaml');

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const YAML = require(workerData.yamlPath);
const readYamlText = (${readYamlText.toString()});
parentPort.on('message', ({ id, text, maxQueries }) => {
  let outcome;
  try {
    outcome = readYamlText(YAML, text, maxQueries);
  } catch (err) {
    outcome = { ok: false, problem: 'could not be parsed: ' + String(err && err.message).split('\\n')[0] };
  }
  parentPort.postMessage({ id, outcome });
});
`;

/** Heap of the parse worker: a 1 MiB file's syntax tree fits many times over. */
const WORKER_HEAP_MB = 128;

interface Pending {
  readonly resolve: (outcome: YamlOutcome) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * One long-lived worker, started on first use and reused (a reload costs a
 * message, not a thread start). It holds the process open only while a parse
 * is pending. A parse past its time limit, a crash or an out-of-memory ends
 * the worker; every parse in it fails with a clear problem and the next parse
 * starts a fresh one.
 */
class ParseWorker {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();

  parse(text: string, options: OffThreadOptions): Promise<YamlOutcome> {
    const worker = this.started();
    const id = this.nextId++;
    return new Promise<YamlOutcome>((resolve) => {
      const timer = setTimeout(() => this.restart(`took longer than ${options.timeoutMs} ms to parse; not loaded`, id), options.timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve, timer });
      worker.ref();
      worker.postMessage({ id, text, maxQueries: options.maxQueries });
    });
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { yamlPath: YAML_PATH },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      stdout: true,
      stderr: true,
    });
    worker.unref();
    worker.on('message', ({ id, outcome }: { id: number; outcome: YamlOutcome }) => this.settle(id, outcome));
    worker.on('error', (err) => this.restart(`could not be parsed: ${err.message.split('\n')[0] ?? ''}`));
    worker.on('exit', (code) => {
      if (this.worker === worker) this.restart(`could not be parsed: the parser stopped (exit ${code})`);
    });
    this.worker = worker;
    return worker;
  }

  private settle(id: number, outcome: YamlOutcome): void {
    const entry = this.pending.get(id);
    if (entry === undefined) return;
    this.pending.delete(id);
    clearTimeout(entry.timer);
    if (this.pending.size === 0) this.worker?.unref();
    entry.resolve(outcome);
  }

  /** Ends the worker: `timedOut` gets `problem`, any other pending parse a retry-later problem. */
  private restart(problem: string, timedOut?: number): void {
    const worker = this.worker;
    this.worker = undefined;
    if (worker !== undefined) void worker.terminate();
    for (const id of [...this.pending.keys()]) {
      this.settle(id, { ok: false, problem: timedOut === undefined || id === timedOut ? problem : 'could not be parsed: the parser was restarted; try again' });
    }
  }
}

const parser = new ParseWorker();

export function readYamlTextOffThread(text: string, options: OffThreadOptions): Promise<YamlOutcome> {
  return parser.parse(text, options);
}
