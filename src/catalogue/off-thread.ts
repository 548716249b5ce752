import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { readYamlText, type YamlOutcome } from './yaml-text.js';

/**
 * Runs readYamlText in a worker thread, so a large or slow catalogue never
 * holds the event loop that answers KEDA (docs/catalogue.md, "Limits"). One
 * worker per parse: reloads are rare, and a worker that runs past `timeoutMs`
 * or past its heap cap is simply terminated. What comes back is the plain
 * value (structured clone keeps `.inf`, `.nan` and own `__proto__` keys as
 * they were); zod validation of it is cheap and stays on the main thread.
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
const readYamlText = (${readYamlText.toString()});
parentPort.postMessage(readYamlText(require(workerData.yamlPath), workerData.text, workerData.maxQueries));
`;

/** Heap of one parse worker: a 1 MiB file's syntax tree fits many times over. */
const WORKER_HEAP_MB = 128;

export function readYamlTextOffThread(text: string, options: OffThreadOptions): Promise<YamlOutcome> {
  return new Promise<YamlOutcome>((resolve) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { yamlPath: YAML_PATH, text, maxQueries: options.maxQueries },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      stdout: true,
      stderr: true,
    });
    let settled = false;
    const settle = (outcome: YamlOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      resolve(outcome);
    };
    const timer = setTimeout(
      () => settle({ ok: false, problem: `took longer than ${options.timeoutMs} ms to parse; not loaded` }),
      options.timeoutMs,
    );
    timer.unref();
    worker.once('message', (outcome: YamlOutcome) => settle(outcome));
    worker.once('error', (err) => settle({ ok: false, problem: `could not be parsed: ${err.message.split('\n')[0] ?? ''}` }));
    worker.once('exit', (code) => settle({ ok: false, problem: `could not be parsed: the parser stopped (exit ${code})` }));
  });
}
