#!/usr/bin/env node
/**
 * `npm start`: the all-in-one demo (src/demo/program.ts) in the CLI shell. A
 * stop waits up to 15 s; only the first SIGINT/SIGTERM counts (see
 * `ignoreRepeatedStop` in shell.ts: npm delivers Ctrl-C twice).
 */
import { demoConfig, startDemo, type RunningDemo } from '../demo/program.js';
import { exitWhenDone, invokedDirectly, launch } from './shell.js';
import { createLogger } from '../log.js';
import { withTelemetry } from '../telemetry/start.js';

const failure = { prefix: 'dfe demo: ' };

/** Runs the demo. Resolves with it running, or the exit code when it will not start. */
export function main(env: NodeJS.ProcessEnv = process.env): Promise<RunningDemo | number> {
  return launch({
    failure,
    configure: () => demoConfig(env),
    start: (config) => withTelemetry({ serviceName: 'dfe-demo', logger: () => createLogger(config.log) }, () => startDemo(config)),
    signals: (demo) => ({ logger: demo.logger, graceMs: 15_000, stoppingMessage: 'shutting down', ignoreRepeatedStop: true }),
  });
}

if (invokedDirectly(import.meta.url)) exitWhenDone(main(), failure);
