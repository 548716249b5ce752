import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

/**
 * A REAL `clickhouse-server` process (Debian's 18.16, installed by
 * .ci/install-clickhouse-server.sh) on a free loopback port with its own temp
 * config and data directory, for transport-level fault tests: kill it mid-run,
 * restart it on the same port and data.
 *
 * Sharp edges of 18.16 with @clickhouse/client 1.23 (checked by
 * test/chaos/fault-injectors.test.ts):
 * - no query parameters: any `query_params` become `param_x` URL settings and
 *   18.16 answers `Code: 115 Unknown setting param_x`. Use plain SQL.
 * - unknown settings are errors (e.g. `log_comment`); `max_execution_time` works.
 * - formats JSON and JSONEachRow work; JSONCompactEachRow does not exist yet.
 * - 64-bit integers come back quoted (`count()` → "1000"): parse numeric strings.
 * - `sleep(x)` is capped at 3 s per block; use it for slow queries.
 */
export type ServerAvailability =
  | { readonly kind: 'available'; readonly binary: string; readonly version: string }
  | { readonly kind: 'missing'; readonly reason: string };

export type ServerState = 'running' | 'stopped';

export interface ClickHouseServerProcess {
  readonly port: number;
  /** `http://127.0.0.1:<port>` — no credentials (user `default`, empty password). */
  readonly url: string;
  readonly dir: string;
  state(): ServerState;
  pid(): number | undefined;
  /** SIGTERM, then wait for the process to exit (SIGKILL after `graceMs`, default 10 000). */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL mid-run, then wait for the exit: a crash, not a shutdown. */
  kill(): Promise<void>;
  /** Start again on the same port and data directory; resolves once `/ping` answers. */
  restart(): Promise<void>;
  /** Stop (if running) and remove the temp directory. */
  dispose(): Promise<void>;
}

const BINARY_CANDIDATES = ['/usr/sbin/clickhouse-server', '/usr/bin/clickhouse-server'];
const READY_TIMEOUT_MS = 30_000;

let availability: ServerAvailability | undefined;

/** Whether a clickhouse-server binary is here; a reason string for a skip when not. */
export function clickHouseServerAvailability(): ServerAvailability {
  availability ??= probe();
  return availability;
}

/** DFE_TEST_CLICKHOUSE_SERVER_BIN names the binary to use (or a missing path, to see the skips). */
function probe(): ServerAvailability {
  const forced = process.env.DFE_TEST_CLICKHOUSE_SERVER_BIN;
  const pathHit = spawnSync('sh', ['-c', 'command -v clickhouse-server'], { encoding: 'utf8' }).stdout.trim();
  const candidates = forced ? [forced] : [pathHit, ...BINARY_CANDIDATES];
  const binary = candidates.find((b) => b !== '' && spawnSync('test', ['-x', b]).status === 0);
  if (!binary) {
    return {
      kind: 'missing',
      reason: forced
        ? `DFE_TEST_CLICKHOUSE_SERVER_BIN=${forced} is not an executable`
        : 'clickhouse-server is not installed (run .ci/install-clickhouse-server.sh)',
    };
  }
  const dpkg = spawnSync('dpkg-query', ['-W', '-f=${Version}', 'clickhouse-server'], { encoding: 'utf8' });
  return { kind: 'available', binary, version: dpkg.status === 0 ? dpkg.stdout.trim() : 'unknown' };
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** A crashed test file must not leave servers behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

export interface StartServerOptions {
  /** Listen here (e.g. a port a test held refused until now). Default: a free port. */
  readonly port?: number;
  /** Record every query in system.query_log (to count what reached the server). Default false. */
  readonly logQueries?: boolean;
}

export async function startClickHouseServer(options: StartServerOptions = {}): Promise<ClickHouseServerProcess> {
  const found = clickHouseServerAvailability();
  if (found.kind === 'missing') throw new Error(found.reason);
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), 'dfe-chserver-'));
  const port = options.port ?? (await freePort());
  writeConfig(dir, port, options.logQueries ?? false);
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const proc = spawn(found.binary, [`--config-file=${join(dir, 'config.xml')}`], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    live.add(proc);
    proc.once('exit', () => live.delete(proc));
    child = proc;
    await waitReady(url, proc, dir);
  };

  const waitExit = async (proc: ChildProcess, signal: NodeJS.Signals, graceMs: number): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };

  await launch();
  return {
    port,
    url,
    dir,
    state: () => (child && child.exitCode === null && child.signalCode === null ? 'running' : 'stopped'),
    pid: () => child?.pid,
    async stop(graceMs = 10_000) {
      if (child) await waitExit(child, 'SIGTERM', graceMs);
    },
    async kill() {
      if (child) await waitExit(child, 'SIGKILL', 0);
    },
    async restart() {
      if (child) await waitExit(child, 'SIGTERM', 10_000);
      await launch();
    },
    async dispose() {
      if (child) await waitExit(child, 'SIGKILL', 0);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function waitReady(url: string, proc: ChildProcess, dir: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      throw new Error(`clickhouse-server exited during startup (${proc.exitCode ?? proc.signalCode}): ${logTail(dir)}`);
    }
    try {
      const res = await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1_000) });
      if (res.ok && (await res.text()).startsWith('Ok')) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGKILL');
  throw new Error(`clickhouse-server did not answer /ping within ${READY_TIMEOUT_MS} ms: ${logTail(dir)}`);
}

function logTail(dir: string): string {
  try {
    return readFileSync(join(dir, 'server.err.log'), 'utf8').split('\n').slice(-5).join(' | ').slice(0, 600);
  } catch {
    return '(no error log)';
  }
}

/** HTTP only on 127.0.0.1, no TCP/interserver ports, small caches, one user. */
function writeConfig(dir: string, port: number, logQueries: boolean): void {
  for (const sub of ['data', 'tmp', 'user_files', 'format_schemas']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(
    join(dir, 'config.xml'),
    `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>${dir}/server.log</log><errorlog>${dir}/server.err.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${port}</http_port>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <format_schema_path>${dir}/format_schemas/</format_schema_path>
  <users_config>${dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <keep_alive_timeout>3</keep_alive_timeout>
  <query_log><database>system</database><table>query_log</table><flush_interval_milliseconds>500</flush_interval_milliseconds></query_log>
</yandex>
`,
  );
  writeFileSync(
    join(dir, 'users.xml'),
    `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>1000000000</max_memory_usage><log_queries>${logQueries ? 1 : 0}</log_queries></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`,
  );
}
