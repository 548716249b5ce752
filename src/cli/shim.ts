#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.js';
import { DfeError, describeError, isDfeError } from '../errors.js';
import { startShim, type RunningShim } from '../shim/start.js';

export { startShim, type RunningShim, type StartShimOptions } from '../shim/start.js';

const USAGE = `Usage: dfe-keda-shim [run] [options]

Serves the query catalogue to KEDA's metrics-api trigger, fail-safe (docs/failsafe.md, docs/api.md).
Every option has an environment twin; the option wins.

  --port <n>             listen port            (DFE_KEDA_SHIM_PORT, default 8080)
  --host <addr>          listen address         (DFE_KEDA_SHIM_HOST, default 0.0.0.0)
  --queries <file>       built-in catalogue     (DFE_KEDA_SHIM_BUILTIN_QUERIES, default the package's queries/queries.yaml)
  --override <file>      override catalogue     (DFE_KEDA_SHIM_QUERY_CONFIG; hot-reloaded, and on SIGHUP)
  --clickhouse-url <u>   ClickHouse HTTP URL    (DFE_CLICKHOUSE_URL; without it: the embedded engine)
  --embedded-path <dir>  embedded data dir      (DFE_EMBEDDED_PATH, default ./.dfe/clickhouse)
  -h, --help             this text

Exit codes: 0 after SIGTERM/SIGINT, 2 for a bad option or configuration, 1 for any
other startup failure (catalogue, ClickHouse, listen).`;

function parseFlags(argv: readonly string[]): { help: boolean; flags: Record<string, string | undefined> } {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      queries: { type: 'string' },
      override: { type: 'string' },
      'clickhouse-url': { type: 'string' },
      'embedded-path': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const extra = positionals[0] === 'run' ? positionals.slice(1) : positionals;
  if (extra.length > 0) throw new DfeError('USAGE', `unknown command ${extra.join(' ')} (only "run")`);
  const { help, ...flags } = values;
  return { help: help === true, flags: flags as Record<string, string | undefined> };
}

/** The exit code a startup failure gets: 2 for usage and configuration, 1 for the rest. */
export function exitCodeOf(err: unknown): number {
  if (isDfeError(err, 'CONFIG_INVALID') || isDfeError(err, 'USAGE')) return 2;
  // parseArgs' own errors (unknown option, missing value) are usage errors too.
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS') ? 2 : 1;
}

/** Runs the CLI. Resolves with the running shim, or an exit code when it will not run. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<RunningShim | number> {
  try {
    const { help, flags } = parseFlags(argv);
    if (help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    return await startShim({ config: loadConfig(env, flags) });
  } catch (err) {
    // One line an operator can act on: it names the key or file (DfeError messages do).
    const line = isDfeError(err) ? (err.message.split('\n')[0] ?? err.code) : describeError(err);
    process.stderr.write(`dfe-keda-shim: ${line}\n`);
    return exitCodeOf(err);
  }
}

function invokedDirectly(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  const result = await main(process.argv.slice(2));
  if (typeof result === 'number') process.exit(result);
}
