#!/usr/bin/env node
/** `npm start`: the all-in-one demo (src/demo/program.ts), with its exit code. */
import { describeError, isDfeError } from '../errors.js';
import { runDemo } from '../demo/program.js';

runDemo().catch((err: unknown) => {
  const line = isDfeError(err) ? (err.message.split('\n')[0] ?? err.code) : describeError(err);
  process.stderr.write(`dfe demo: ${line}\n`);
  process.exit(isDfeError(err, 'CONFIG_INVALID') ? 2 : 1);
});
