#!/usr/bin/env node
/**
 * `npm start`: the all-in-one demo (src/demo/program.ts) in the CLI shell. A
 * stop waits up to 15 s; only the first SIGINT/SIGTERM counts (see
 * `ignoreRepeatedStop` in shell.ts: npm delivers Ctrl-C twice).
 */
import { demoConfig, startDemo } from '../demo/program.js';
import { createLogger } from '../log.js';
import { withTelemetry } from '../telemetry/start.js';
import { exitWhenDone, launch } from './shell.js';

const failure = { prefix: 'dfe demo: ' };

exitWhenDone(
  launch({
    failure,
    configure: () => demoConfig(),
    start: (config) => withTelemetry({ serviceName: 'dfe-demo', logger: () => createLogger(config.log) }, () => startDemo(config)),
    signals: (demo) => ({ logger: demo.logger, graceMs: 15_000, stoppingMessage: 'shutting down', ignoreRepeatedStop: true }),
  }),
  failure,
);
