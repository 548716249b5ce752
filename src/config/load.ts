import type { z } from 'zod';
import { DfeError, showValue } from '../errors.js';
import { ADMISSION_DEFAULTS, envSchema, type ParsedEnv } from './schema.js';

export type Backend = 'server' | 'embedded';
export type Topology = 'auto' | 'single' | 'replicated';

export interface ClickHouseConfig {
  /** `auto` picks `server` when a URL or host is set, else `embedded`. */
  readonly backend: Backend;
  /** Server HTTP endpoint without credentials, e.g. `https://ch:8443`. */
  readonly url: string | undefined;
  readonly username: string;
  /** Never logged; see log.ts redaction paths. */
  readonly password: string;
  readonly verifyTls: boolean;
  readonly caCertPath: string | undefined;
  readonly requestTimeoutMs: number;
  /** Idle keep-alive socket TTL of the server client, ms; 0: keep-alive off (clickhouse/client.ts). */
  readonly idleSocketTtlMs: number;
  readonly embeddedPath: string;
  /** Passed to the embedded engine as `--config-file` (absolute or relative to the working directory). */
  readonly embeddedConfigFile: string | undefined;
  readonly dataDatabase: string;
  readonly otelDatabase: string;
  readonly topology: Topology;
  /** Cluster name for ON CLUSTER DDL on a macro-configured cluster. */
  readonly cluster: string;
  /** hunt_run retention in days: the table's TTL (docs/tables.md). */
  readonly runRetentionDays: number;
  /** Seconds between the server's recounts of the backlog; 0: off (docs/tables.md#the-server-refreshed-count). */
  readonly backlogRefreshSeconds: number;
}

export interface ShimConfig {
  readonly host: string;
  readonly port: number;
  readonly builtinCataloguePath: string | undefined;
  readonly overridePath: string | undefined;
  readonly cacheMaxKeys: number;
  readonly reloadIntervalMs: number;
  /** The last-good cache's snapshot and peers (docs/failsafe.md#snapshot-and-peers). */
  readonly lastGood: {
    /** Unset: no snapshot. */
    readonly snapshotDir: string | undefined;
    readonly snapshotIntervalMs: number;
    /** Base URLs; empty: no peer lookups. */
    readonly peers: readonly string[];
    readonly peerTimeoutMs: number;
  };
  /** Queries one catalogue file may define (a bigger file is rejected before it is turned into objects). */
  readonly maxQueries: number;
  readonly auth: {
    readonly mode: 'none' | 'bearer' | 'apiKey' | 'basic';
    readonly tokenFile: string | undefined;
    readonly usernameFile: string | undefined;
    readonly passwordFile: string | undefined;
    /** apiKey mode: the header and the query parameter KEDA sends the key in (its keyParamName). */
    readonly apiKeyHeader: string;
    readonly apiKeyParam: string;
  };
  /** Caps on ClickHouse queries in flight and the bound of the queue waiting for them (docs/failsafe.md#admission). */
  readonly admission: { readonly maxInflight: number; readonly maxInflightPerQuery: number; readonly maxQueued: number };
  /** `clientCaFile`: KEDA must present a client certificate signed by it (mutual TLS). */
  readonly tls: { readonly certFile: string; readonly keyFile: string; readonly clientCaFile: string | undefined } | undefined;
  /** KEDA's external scaler protocol on its own port, same host and TLS files (docs/api.md#grpc); undefined: off. */
  readonly grpc: { readonly port: number; readonly checkIntervalMs: number } | undefined;
}

/** What the smoothing controller does (docs/smoothing.md, "Off, observe, on"). */
export type SmoothingMode = 'off' | 'observe' | 'on';

/** Load smoothing (docs/smoothing.md); each setting's env twin is DFE_HUNT_SMOOTHING_<NAME>. */
export interface SmoothingConfig {
  /** DFE_HUNT_SMOOTHING, default observe: the load gauges and what it would move, no offset written. */
  readonly mode: SmoothingMode;
  /** Seconds between planning cycles, default 300. */
  readonly cycleSeconds: number;
  /** Δ, seconds per curve bucket, default 30. */
  readonly bucketSeconds: number;
  /** max_step = floor(T × fraction), default 0.25. */
  readonly maxStepFraction: number;
  /** Commit a move only if J falls by more than hysteresis × J_i, the moved hunt's own part of J. */
  readonly hysteresis: number;
  /** Cycles a moved hunt stays put, default 3. */
  readonly cooldownCycles: number;
  /** A learned offset not moved for this long is settled (export writes it), default 7 d. */
  readonly settlingSeconds: number;
  /** Trailing window of the cost model (p95s), default 24 h. */
  readonly costWindowSeconds: number;
  /** M_cap; undefined: the server's max_server_memory_usage. */
  readonly memoryCapBytes: number | undefined;
  /** Cores of C_cap; undefined: the server's max_threads. */
  readonly cpuCores: number | undefined;
  readonly weights: { readonly cpu: number; readonly mem: number };
}

/** Escalation (docs/smoothing.md): ON by default even with smoothing off. */
export interface AutoDisableConfig {
  /** K code-241 failures within windowSeconds disable a hunt; null = off. Default 3 in 3600 s. */
  readonly memCrashloop: { readonly failures: number; readonly windowSeconds: number } | null;
  /** Opt-in global ceilings on a hunt's p95 cost; undefined = no ceiling. */
  readonly maxP95MemoryBytes: number | undefined;
  readonly maxP95CpuUs: number | undefined;
  readonly maxP95DurationMs: number | undefined;
}

export interface RunnerConfig {
  readonly huntsDir: string;
  readonly spreadFraction: number;
  readonly pollSeconds: number;
  readonly cap: number;
  readonly metricsPort: number;
  /** Listen address of the probes and /metrics. */
  readonly metricsHost: string;
  readonly leaseSeconds: number;
  readonly settleMs: number;
  /** How long stop() waits for runs in flight before it abandons them (docs/runner.md#stopping). */
  readonly stopDeadlineSeconds: number;
  readonly runnerId: string | undefined;
  /** Longest window a run covers after an outage (docs/hunts.md#catch-up); a hunt file's `max_catchup` replaces it. */
  readonly maxCatchupSeconds: number;
  /** `auto` (the mode `schema --apply` recorded), `keeper` or `tables` (docs/claim-protocol.md). */
  readonly claims: 'auto' | 'keeper' | 'tables';
  readonly smoothing: SmoothingConfig;
  readonly autoDisable: AutoDisableConfig;
}

export interface AppConfig {
  readonly clickhouse: ClickHouseConfig;
  readonly shim: ShimConfig;
  readonly runner: RunnerConfig;
  readonly log: { readonly level: string; readonly format: 'json' | 'pretty' };
  /** One line per old variable name read as a fallback; the shell logs them at start. */
  readonly notices: readonly string[];
}

/** CLI flags, by their env twin, so that flags override env with one schema. */
const FLAG_TO_ENV: Readonly<Record<string, keyof z.input<typeof envSchema>>> = Object.freeze({
  'clickhouse-url': 'DFE_CLICKHOUSE_URL',
  'embedded-path': 'DFE_EMBEDDED_PATH',
  'embedded-config': 'DFE_EMBEDDED_CONFIG_FILE',
  claims: 'DFE_COORDINATION_CLAIMS',
  hunts: 'DFE_HUNTS_DIR',
  host: 'DFE_KEDA_SHIM_HOST',
  port: 'DFE_KEDA_SHIM_PORT',
  queries: 'DFE_KEDA_SHIM_BUILTIN_QUERIES',
  override: 'DFE_KEDA_SHIM_QUERY_CONFIG',
  poll: 'DFE_HUNT_RUNNER_POLL_SECONDS',
  cap: 'DFE_HUNT_RUNNER_CAP',
  'metrics-port': 'DFE_HUNT_RUNNER_METRICS_PORT',
  'metrics-host': 'DFE_HUNT_RUNNER_METRICS_HOST',
  'bucket-seconds': 'DFE_HUNT_SMOOTHING_BUCKET_SECONDS',
  'max-step': 'DFE_HUNT_SMOOTHING_MAX_STEP_FRACTION',
  'memory-cap-bytes': 'DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES',
  'cpu-cores': 'DFE_HUNT_SMOOTHING_CPU_CORES',
  weights: 'DFE_HUNT_SMOOTHING_WEIGHTS',
});

/**
 * The gRPC port, when set. KEDA's external scalers send no header, token or key,
 * only a TLS client certificate: with HTTP auth on, the gRPC port must require
 * one (mTLS), or it would serve the same answers without any check.
 */
function grpcSettings(e: ParsedEnv, tls: ShimConfig['tls']): ShimConfig['grpc'] {
  const port = e.DFE_KEDA_SHIM_GRPC_PORT;
  if (port === undefined) return undefined;
  if (port === e.DFE_KEDA_SHIM_PORT) {
    throw new DfeError('CONFIG_INVALID', `DFE_KEDA_SHIM_GRPC_PORT=${port} is also DFE_KEDA_SHIM_PORT: gRPC needs its own port`, {
      key: 'DFE_KEDA_SHIM_GRPC_PORT',
      value: port,
    });
  }
  if (e.DFE_KEDA_SHIM_AUTH_MODE !== 'none' && tls?.clientCaFile === undefined) {
    throw new DfeError(
      'CONFIG_INVALID',
      `DFE_KEDA_SHIM_GRPC_PORT with DFE_KEDA_SHIM_AUTH_MODE=${e.DFE_KEDA_SHIM_AUTH_MODE} needs mutual TLS (DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE): KEDA's external scalers can only authenticate with a client certificate`,
      { key: 'DFE_KEDA_SHIM_GRPC_PORT', value: port },
    );
  }
  return { port, checkIntervalMs: e.DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS };
}

/**
 * Old variable names, read as fallbacks so their users can move over without
 * renaming (README, "Migrating"): the new name wins when both are set, and a
 * start-up line names each fallback read. The original shim's CLICKHOUSE_*
 * names, and this project's own renamed ones.
 */
const LEGACY_ENV: Readonly<Record<string, keyof z.input<typeof envSchema>>> = Object.freeze({
  CLICKHOUSE_HOST: 'DFE_CLICKHOUSE_HOST',
  CLICKHOUSE_PORT: 'DFE_CLICKHOUSE_PORT',
  CLICKHOUSE_USER: 'DFE_CLICKHOUSE_USERNAME',
  CLICKHOUSE_PASSWORD: 'DFE_CLICKHOUSE_PASSWORD',
  CLICKHOUSE_DATABASE: 'DFE_CLICKHOUSE_DATA_DATABASE',
  CLICKHOUSE_SECURE: 'DFE_CLICKHOUSE_SECURE',
  CLICKHOUSE_VERIFY: 'DFE_CLICKHOUSE_VERIFY',
  CLICKHOUSE_CA_CERT: 'DFE_CLICKHOUSE_CA_CERT',
  DFE_ENGINE_HUNTS_PHASE_SPREAD_FRACTION: 'DFE_HUNTS_PHASE_SPREAD_FRACTION',
  DFE_HUNT_SMOOTHING_ENABLED: 'DFE_HUNT_SMOOTHING',
});

/**
 * The boolean DFE_HUNT_SMOOTHING_ENABLED as a state: true acts (on); false was an
 * explicit "never touch my schedule", kept as off (docs/smoothing.md). Anything
 * else goes through unchanged, so the error names the old variable.
 */
function legacySmoothing(value: string): string {
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return 'on';
  if (['0', 'false', 'no', 'off'].includes(v)) return 'off';
  return value;
}

/** Variables as the schema sees them, and for each the name it was read from (an error names that one). */
function pickEnv(env: NodeJS.ProcessEnv): { raw: Record<string, string>; source: Record<string, string> } {
  const raw: Record<string, string> = {};
  const source: Record<string, string> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = env[key];
    // An empty variable means "unset" (Helm renders absent values as "").
    if (value !== undefined && value !== '') {
      raw[key] = value;
      source[key] = key;
    }
  }
  for (const [legacy, key] of Object.entries(LEGACY_ENV)) {
    const value = env[legacy];
    if (raw[key] === undefined && value !== undefined && value !== '') {
      raw[key] = legacy === 'DFE_HUNT_SMOOTHING_ENABLED' ? legacySmoothing(value) : value;
      source[key] = legacy;
    }
  }
  return { raw, source };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** Splits `https://user:pass@host:8443/` into a credential-free URL and its credentials. */
function splitUrlCredentials(raw: string): { url: string; username?: string; password?: string } {
  const parsed = new URL(raw);
  const username = parsed.username ? decodeURIComponent(parsed.username) : undefined;
  const password = parsed.password ? decodeURIComponent(parsed.password) : undefined;
  parsed.username = '';
  parsed.password = '';
  const url = parsed.toString().replace(/\/$/, '');
  return { url, ...(username === undefined ? {} : { username }), ...(password === undefined ? {} : { password }) };
}

/**
 * A URL-ish value with any `user:password@` part masked, for error messages: an
 * invalid DFE_CLICKHOUSE_URL is echoed back, and it may carry the password.
 * Everything up to the LAST `@` goes, since a malformed URL may hold a raw `@`.
 */
function maskUrlCredentials(value: string): string {
  return value.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)?.*@/s, '$1[redacted]@');
}

/** What an error message may show of a variable's value: never a password. */
function shownValue(key: string, value: string | undefined): string {
  if (key === 'DFE_CLICKHOUSE_PASSWORD' || key === 'CLICKHOUSE_PASSWORD') return '[redacted]';
  if ((key === 'DFE_CLICKHOUSE_URL' || key === 'DFE_KEDA_SHIM_PEERS') && value !== undefined) return showValue(maskUrlCredentials(value));
  return showValue(value);
}

/** Each auth mode's secret files must be set (their contents are read per request, by the shim). */
function assertAuthFiles(e: ParsedEnv): void {
  const mode = e.DFE_KEDA_SHIM_AUTH_MODE;
  const needed: Array<[string, string | undefined]> =
    mode === 'bearer' || mode === 'apiKey'
      ? [['DFE_KEDA_SHIM_AUTH_TOKEN_FILE', e.DFE_KEDA_SHIM_AUTH_TOKEN_FILE]]
      : mode === 'basic'
        ? [
            ['DFE_KEDA_SHIM_AUTH_USERNAME_FILE', e.DFE_KEDA_SHIM_AUTH_USERNAME_FILE],
            ['DFE_KEDA_SHIM_AUTH_PASSWORD_FILE', e.DFE_KEDA_SHIM_AUTH_PASSWORD_FILE],
          ]
        : [];
  for (const [key, value] of needed) {
    if (value === undefined) throw new DfeError('CONFIG_INVALID', `DFE_KEDA_SHIM_AUTH_MODE=${mode} needs ${key}`, { key, value: mode });
  }
}

function build(e: ParsedEnv, notices: readonly string[]): AppConfig {
  let url: string | undefined;
  let username = e.DFE_CLICKHOUSE_USERNAME;
  let password = e.DFE_CLICKHOUSE_PASSWORD;
  if (e.DFE_CLICKHOUSE_URL) {
    const split = splitUrlCredentials(e.DFE_CLICKHOUSE_URL);
    url = split.url;
    username = split.username ?? username;
    password = split.password ?? password;
  } else if (e.DFE_CLICKHOUSE_HOST) {
    url = `${e.DFE_CLICKHOUSE_SECURE ? 'https' : 'http'}://${e.DFE_CLICKHOUSE_HOST}:${e.DFE_CLICKHOUSE_PORT}`;
  }
  let backend: Backend;
  if (e.DFE_CLICKHOUSE_BACKEND === 'auto') backend = url ? 'server' : 'embedded';
  else backend = e.DFE_CLICKHOUSE_BACKEND;
  if (backend === 'server' && !url) {
    throw new DfeError(
      'CONFIG_INVALID',
      'DFE_CLICKHOUSE_BACKEND=server needs DFE_CLICKHOUSE_URL or DFE_CLICKHOUSE_HOST: no ClickHouse server is configured',
      { key: 'DFE_CLICKHOUSE_URL' },
    );
  }
  const tls =
    e.DFE_KEDA_SHIM_TLS_CERT_FILE && e.DFE_KEDA_SHIM_TLS_KEY_FILE
      ? { certFile: e.DFE_KEDA_SHIM_TLS_CERT_FILE, keyFile: e.DFE_KEDA_SHIM_TLS_KEY_FILE, clientCaFile: e.DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE }
      : undefined;
  if (e.DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE && !tls) {
    throw new DfeError('CONFIG_INVALID', 'DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE (client certificates) needs TLS: set DFE_KEDA_SHIM_TLS_CERT_FILE and DFE_KEDA_SHIM_TLS_KEY_FILE', {
      key: 'DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE',
    });
  }
  if (Boolean(e.DFE_KEDA_SHIM_TLS_CERT_FILE) !== Boolean(e.DFE_KEDA_SHIM_TLS_KEY_FILE)) {
    throw new DfeError('CONFIG_INVALID', 'DFE_KEDA_SHIM_TLS_CERT_FILE and DFE_KEDA_SHIM_TLS_KEY_FILE go together', {
      key: e.DFE_KEDA_SHIM_TLS_CERT_FILE ? 'DFE_KEDA_SHIM_TLS_KEY_FILE' : 'DFE_KEDA_SHIM_TLS_CERT_FILE',
    });
  }
  assertAuthFiles(e);
  const grpc = grpcSettings(e, tls);
  const admission = admissionOf(e, backend);
  return {
    clickhouse: {
      backend,
      url,
      username,
      password,
      verifyTls: e.DFE_CLICKHOUSE_VERIFY,
      caCertPath: e.DFE_CLICKHOUSE_CA_CERT,
      requestTimeoutMs: e.DFE_CLICKHOUSE_REQUEST_TIMEOUT_MS,
      idleSocketTtlMs: e.DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS,
      embeddedPath: e.DFE_EMBEDDED_PATH,
      embeddedConfigFile: e.DFE_EMBEDDED_CONFIG_FILE,
      dataDatabase: e.DFE_CLICKHOUSE_DATA_DATABASE,
      otelDatabase: e.DFE_KEDA_SHIM_OTEL_DATABASE ?? e.DFE_CLICKHOUSE_DATA_DATABASE,
      topology: e.DFE_CLICKHOUSE_TOPOLOGY,
      cluster: e.DFE_CLICKHOUSE_CLUSTER,
      runRetentionDays: e.DFE_HUNT_RUN_RETENTION_DAYS,
      backlogRefreshSeconds: e.DFE_BACKLOG_REFRESH_SECONDS,
    },
    shim: {
      host: e.DFE_KEDA_SHIM_HOST,
      port: e.DFE_KEDA_SHIM_PORT,
      builtinCataloguePath: e.DFE_KEDA_SHIM_BUILTIN_QUERIES,
      overridePath: e.DFE_KEDA_SHIM_QUERY_CONFIG,
      cacheMaxKeys: e.DFE_KEDA_SHIM_CACHE_MAX_KEYS,
      reloadIntervalMs: e.DFE_KEDA_SHIM_RELOAD_INTERVAL_MS,
      lastGood: {
        snapshotDir: e.DFE_KEDA_SHIM_SNAPSHOT_DIR,
        snapshotIntervalMs: e.DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS,
        peers: e.DFE_KEDA_SHIM_PEERS ?? [],
        peerTimeoutMs: e.DFE_KEDA_SHIM_PEER_TIMEOUT_MS,
      },
      maxQueries: e.DFE_KEDA_SHIM_MAX_QUERIES,
      admission,
      auth: {
        mode: e.DFE_KEDA_SHIM_AUTH_MODE,
        tokenFile: e.DFE_KEDA_SHIM_AUTH_TOKEN_FILE,
        usernameFile: e.DFE_KEDA_SHIM_AUTH_USERNAME_FILE,
        passwordFile: e.DFE_KEDA_SHIM_AUTH_PASSWORD_FILE,
        apiKeyHeader: e.DFE_KEDA_SHIM_AUTH_API_KEY_HEADER,
        apiKeyParam: e.DFE_KEDA_SHIM_AUTH_API_KEY_PARAM,
      },
      tls,
      grpc,
    },
    runner: {
      huntsDir: e.DFE_HUNTS_DIR,
      spreadFraction: e.DFE_HUNTS_PHASE_SPREAD_FRACTION,
      pollSeconds: e.DFE_HUNT_RUNNER_POLL_SECONDS,
      cap: e.DFE_HUNT_RUNNER_CAP,
      metricsPort: e.DFE_HUNT_RUNNER_METRICS_PORT,
      metricsHost: e.DFE_HUNT_RUNNER_METRICS_HOST,
      leaseSeconds: e.DFE_HUNT_RUNNER_LEASE_SECONDS,
      settleMs: e.DFE_HUNT_RUNNER_SETTLE_MS,
      stopDeadlineSeconds: e.DFE_HUNT_RUNNER_STOP_DEADLINE_SECONDS,
      runnerId: e.DFE_HUNT_RUNNER_ID,
      maxCatchupSeconds: e.DFE_HUNT_MAX_CATCHUP_SECONDS,
      claims: e.DFE_COORDINATION_CLAIMS,
      smoothing: {
        mode: e.DFE_HUNT_SMOOTHING,
        cycleSeconds: e.DFE_HUNT_SMOOTHING_CYCLE_SECONDS,
        bucketSeconds: e.DFE_HUNT_SMOOTHING_BUCKET_SECONDS,
        maxStepFraction: e.DFE_HUNT_SMOOTHING_MAX_STEP_FRACTION,
        hysteresis: e.DFE_HUNT_SMOOTHING_HYSTERESIS,
        cooldownCycles: e.DFE_HUNT_SMOOTHING_COOLDOWN_CYCLES,
        settlingSeconds: e.DFE_HUNT_SMOOTHING_SETTLING_SECONDS,
        costWindowSeconds: e.DFE_HUNT_SMOOTHING_COST_WINDOW_SECONDS,
        memoryCapBytes: e.DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES,
        cpuCores: e.DFE_HUNT_SMOOTHING_CPU_CORES,
        weights: e.DFE_HUNT_SMOOTHING_WEIGHTS,
      },
      autoDisable: {
        memCrashloop: e.DFE_HUNT_AUTODISABLE_MEM_CRASHLOOP,
        maxP95MemoryBytes: e.DFE_HUNT_AUTODISABLE_MAX_P95_MEMORY_BYTES,
        maxP95CpuUs: e.DFE_HUNT_AUTODISABLE_MAX_P95_CPU_US,
        maxP95DurationMs: e.DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS,
      },
    },
    log: { level: e.LOG_LEVEL, format: e.LOG_FORMAT },
    notices,
  };
}

/** The admission settings, each defaulting per backend; a per-query cap above the global one is an error. */
function admissionOf(e: ParsedEnv, backend: Backend): ShimConfig['admission'] {
  const defaults = ADMISSION_DEFAULTS[backend];
  const admission = {
    maxInflight: e.DFE_KEDA_SHIM_MAX_INFLIGHT ?? defaults.maxInflight,
    maxInflightPerQuery: e.DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY ?? Math.min(defaults.maxInflightPerQuery, e.DFE_KEDA_SHIM_MAX_INFLIGHT ?? Infinity),
    maxQueued: e.DFE_KEDA_SHIM_MAX_QUEUED ?? defaults.maxQueued,
  };
  if (admission.maxInflightPerQuery > admission.maxInflight) {
    throw new DfeError(
      'CONFIG_INVALID',
      `invalid DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY=${admission.maxInflightPerQuery}: must be at most DFE_KEDA_SHIM_MAX_INFLIGHT (${admission.maxInflight})`,
      { key: 'DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY', value: String(admission.maxInflightPerQuery) },
    );
  }
  return admission;
}

/**
 * Validates env (and flag overrides, given by flag name) once and returns a
 * frozen config. Every error names the variable and the value it had — except
 * credentials: the password is never echoed, nor the `user:password@` of a URL.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, flags: Record<string, string | undefined> = {}): AppConfig {
  const { raw, source } = pickEnv(env);
  for (const [flag, value] of Object.entries(flags)) {
    const key = FLAG_TO_ENV[flag];
    if (key !== undefined && value !== undefined) {
      raw[key] = value;
      source[key] = key;
    }
  }
  const parsed = envSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? 'environment');
    const shown = shownValue(key, raw[key]);
    const viaFlag = Object.entries(FLAG_TO_ENV).find(([flag, k]) => k === key && flags[flag] !== undefined)?.[0];
    const named = source[key] ?? key;
    const where = viaFlag ? `--${viaFlag}` : named === key ? key : `${named} (fallback for ${key})`;
    throw new DfeError('CONFIG_INVALID', `invalid ${where}=${shown}: ${issue?.message ?? 'invalid'}`, { key, value: shown });
  }
  const notices = Object.entries(source)
    .filter(([key, from]) => from !== key)
    .map(([key, from]) => `read ${from} as a fallback for ${key}; rename it`);
  return deepFreeze(build(parsed.data, notices));
}
