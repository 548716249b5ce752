#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { loadConfig, type AppConfig } from '../config/load.js';
import { DfeError } from '../errors.js';
import { createLogger } from '../log.js';
import { withTelemetry } from '../telemetry/start.js';
import { startShim, type RunningShim } from '../shim/start.js';
import { exitWhenDone, invokedDirectly, launch, type Program } from './shell.js';
import { CHECK_USAGE, checkSettings, runCheck } from './shim-check.js';

export { startShim, type RunningShim, type StartShimOptions } from '../shim/start.js';

const USAGE = `Usage: dfe-keda-shim [run] [options]
       dfe-keda-shim check [options]   (asks a running shim what KEDA asks; --help for its options)

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
  if (extra.length > 0) throw new DfeError('USAGE', `unknown command ${extra.join(' ')} (only "run" and "check")`);
  const { help, ...flags } = values;
  return { help: help === true, flags: flags as Record<string, string | undefined> };
}

const GRACE_MS = 10_000;

/**
 * The shim as the shell drives it: argv and env → config, start, and signals
 * (SIGTERM/SIGINT: stop accepting, let in-flight answers finish, close
 * ClickHouse, exit 0, within 10 s; SIGHUP: reload the catalogue).
 */
function shimProgram(argv: readonly string[], env: NodeJS.ProcessEnv): Program<AppConfig, RunningShim> {
  return {
    failure: { prefix: 'dfe-keda-shim: ' },
    configure() {
      const { help, flags } = parseFlags(argv);
      if (!help) return loadConfig(env, flags);
      process.stdout.write(`${USAGE}\n`);
      return 0;
    },
    start: (config) => withTelemetry({ serviceName: 'dfe-keda-shim', env, logger: () => createLogger(config.log), context: 'sync' }, () => startShim({ config })),
    signals: (shim) => ({
      logger: shim.logger,
      graceMs: GRACE_MS,
      stoppingMessage: 'shutting down: finishing in-flight answers',
      stoppedMessage: 'shut down',
      reload: () => shim.catalogue.reload(),
    }),
  };
}

/** Runs the CLI. Resolves with the running shim, or an exit code when it will not run. */
export function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<RunningShim | number> {
  if (argv[0] === 'check') {
    if (argv.includes('--help') || argv.includes('-h')) {
      process.stdout.write(`${CHECK_USAGE}\n`);
      return Promise.resolve(0);
    }
    return Promise.resolve()
      .then(() => runCheck(checkSettings(argv.slice(1), env), (line) => process.stdout.write(`${line}\n`)))
      .catch((err: unknown) => {
        if (err instanceof DfeError) {
          process.stderr.write(`dfe-keda-shim check: ${err.message}\n`);
          return 2;
        }
        throw err;
      });
  }
  return launch(shimProgram(argv, env));
}

if (invokedDirectly(import.meta.url)) exitWhenDone(main(process.argv.slice(2)), { prefix: 'dfe-keda-shim: ' });
