import { z } from 'zod';
import { parseSecondsOrDuration } from './duration.js';

/**
 * Every setting, its default and its unit, defined once. Env first, CLI flags
 * override (see config/load.ts). Parsed once at startup, then frozen.
 */
export const DATABASE_NAME = /^[A-Za-z0-9_-]+$/;

const port = (name: string) =>
  z
    .string()
    .trim()
    .regex(/^\d{1,5}$/, {
      message: `${name} must be a port number (Kubernetes service links inject "tcp://…"; disable them with enableServiceLinks: false)`,
    })
    .transform(Number)
    .refine((n) => n > 0 && n < 65536, { message: `${name} must be between 1 and 65535` });

const bool = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off']))
  .transform((v) => ['1', 'true', 'yes', 'on'].includes(v));

const databaseName = z.string().trim().regex(DATABASE_NAME, { message: 'must match ^[A-Za-z0-9_-]+$' });

const positiveNumber = z
  .string()
  .trim()
  .regex(/^\d+(\.\d+)?$/, { message: 'must be a positive number' })
  .transform(Number)
  .refine((n) => n > 0, { message: 'must be greater than 0' });

/** A count (cache keys, concurrent runs): a fraction would floor to 0, which is no bound or no runs. */
const positiveInteger = z
  .string()
  .trim()
  .regex(/^\d+$/, { message: 'must be a whole number greater than 0' })
  .transform(Number)
  .refine((n) => n > 0 && Number.isSafeInteger(n), { message: 'must be a whole number greater than 0' });

/** A number ≥ 0 (hysteresis). */
const nonNegativeNumber = z
  .string()
  .trim()
  .regex(/^\d+(\.\d+)?$/, { message: 'must be a number ≥ 0' })
  .transform(Number);

/** A whole number ≥ 0 (cool-down cycles). */
const nonNegativeInteger = z
  .string()
  .trim()
  .regex(/^\d+$/, { message: 'must be a whole number ≥ 0' })
  .transform(Number)
  .refine((n) => Number.isSafeInteger(n), { message: 'must be a whole number ≥ 0' });

const fraction = z
  .string()
  .trim()
  .transform(Number)
  .refine((n) => Number.isFinite(n) && n > 0 && n <= 1, { message: 'must be a number in (0, 1]' });

/** Whole seconds (`86400`) or a duration (`1d`, `12h`, `1d6h`), at least 1 s. */
const secondsOrDuration = z
  .string()
  .trim()
  .transform((v, ctx) => {
    const seconds = parseSecondsOrDuration(v);
    if (seconds === undefined) {
      ctx.addIssue({ code: 'custom', message: 'must be whole seconds ≥ 1 or a duration such as 12h, 1d, 1d12h' });
      return z.NEVER;
    }
    return seconds;
  });

/** `cpu,mem` weights of the pressure curve, each ≥ 0, summing to 1 (docs/smoothing.md). */
const smoothingWeights = z
  .string()
  .trim()
  .regex(/^\d+(\.\d+)?\s*,\s*\d+(\.\d+)?$/, { message: 'must be two numbers "cpu,mem", e.g. 0.5,0.5' })
  .transform((v) => {
    const [cpu = 0, mem = 0] = v.split(',').map(Number);
    return { cpu, mem };
  })
  .refine((w) => Math.abs(w.cpu + w.mem - 1) < 1e-9, { message: 'must sum to 1, e.g. 0.5,0.5 or 0.7,0.3' });

/** `K/SECONDS` (K code-241 failures within SECONDS disable a hunt) or `off`. */
const crashloopRule = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^(off|\d+\/\d+)$/, { message: 'must be K/SECONDS (e.g. 3/3600) or off' })
  .transform((v) => {
    if (v === 'off') return null;
    const [failures = 0, windowSeconds = 0] = v.split('/').map(Number);
    return { failures, windowSeconds };
  })
  .refine((r) => r === null || (r.failures >= 1 && r.windowSeconds >= 1), { message: 'needs K ≥ 1 and SECONDS ≥ 1, or off' });

/** `http://host:port[,…]`: base URLs of peer shims, without path, query or credentials. */
export const peerUrls = z
  .string()
  .trim()
  .transform((v) => v.split(',').map((u) => u.trim()).filter((u) => u !== ''))
  .refine((urls) => urls.every(isPeerUrl), { message: 'must be comma-separated base URLs such as http://dfe-keda-shim-peers:8080 (no path, query or credentials)' });

function isPeerUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '' && url.pathname === '/' && url.search === '' && url.hash === '';
  } catch {
    return false;
  }
}

/**
 * Admission defaults per backend (docs/failsafe.md#admission). A server: each
 * query in flight holds one of the client's 256 sockets, so 200 in flight
 * leaves room and one query's keys take at most 32. The embedded engine runs
 * one query at a time per connection: more in flight only queue inside the
 * engine, where the fair queue cannot order them. The queue bound is memory
 * (a waiting query is a few hundred bytes).
 */
export const ADMISSION_DEFAULTS = Object.freeze({
  server: Object.freeze({ maxInflight: 200, maxInflightPerQuery: 32, maxQueued: 10_000 }),
  embedded: Object.freeze({ maxInflight: 8, maxInflightPerQuery: 4, maxQueued: 10_000 }),
});

/** The longest period of the server-refreshed backlog (DFE_BACKLOG_REFRESH_SECONDS; the chart's schema says it too). */
export const BACKLOG_REFRESH_MAX_SECONDS = 3_600;

/** Most queries in flight a setting may ask for: under the server client's 256 sockets. */
export const MAX_INFLIGHT_LIMIT = 250;

/** The longest delay Node.js's setTimeout honours (2^31 − 1 ms); a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;

/** Raw environment (strings), keyed by variable name. */
export const envSchema = z.object({
  DFE_CLICKHOUSE_BACKEND: z.enum(['auto', 'server', 'embedded']).default('auto'),
  DFE_CLICKHOUSE_URL: z.string().trim().url({ message: 'must be a URL such as https://host:8443' }).optional(),
  DFE_CLICKHOUSE_HOST: z.string().trim().min(1).optional(),
  DFE_CLICKHOUSE_PORT: port('DFE_CLICKHOUSE_PORT').default(8123),
  DFE_CLICKHOUSE_SECURE: bool.default(true),
  DFE_CLICKHOUSE_VERIFY: bool.default(true),
  DFE_CLICKHOUSE_CA_CERT: z.string().min(1).optional(),
  DFE_CLICKHOUSE_USERNAME: z.string().default('default'),
  DFE_CLICKHOUSE_PASSWORD: z.string().default(''),
  DFE_CLICKHOUSE_DATA_DATABASE: databaseName.default('dfe'),
  DFE_CLICKHOUSE_TOPOLOGY: z.enum(['auto', 'single', 'replicated']).default('auto'),
  DFE_CLICKHOUSE_CLUSTER: z.string().trim().min(1).default('{cluster}'),
  /** Days hunt_run rows are kept (a TTL on the table, docs/tables.md); whole days, at least 1. */
  DFE_HUNT_RUN_RETENTION_DAYS: positiveInteger.refine((n) => n <= 36_500, { message: 'must be at most 36500 (100 years)' }).default(90),
  /**
   * How often the server recomputes the due count into `hunt_backlog` (a refreshable view,
   * docs/tables.md#the-server-refreshed-count); 0: off, the shim's backlog asks the due query
   * itself. The runner's schema step creates or drops the view; the shim reads it.
   */
  DFE_BACKLOG_REFRESH_SECONDS: nonNegativeInteger
    .refine((n) => n <= BACKLOG_REFRESH_MAX_SECONDS, { message: `must be at most ${BACKLOG_REFRESH_MAX_SECONDS} (an hour)` })
    .default(0),
  DFE_CLICKHOUSE_REQUEST_TIMEOUT_MS: positiveNumber.default(30_000),
  /**
   * How long an idle keep-alive socket to a server is kept for the next query; 0: keep-alive
   * off (a new connection per query; src/clickhouse/client.ts). Keep it below the server's
   * `keep_alive_timeout`, or a socket the server already closed may be reused.
   */
  DFE_CLICKHOUSE_IDLE_SOCKET_TTL_MS: nonNegativeInteger
    .refine((n) => n <= MAX_TIMER_MS, { message: `must be at most ${MAX_TIMER_MS} (the longest timer Node.js keeps)` })
    .default(2_500),
  DFE_EMBEDDED_PATH: z.string().min(1).default('./.dfe/clickhouse'),
  /** A ClickHouse config file for the embedded engine (e.g. testkeeper + keeper_map_path_prefix: docs/embedded.md). */
  DFE_EMBEDDED_CONFIG_FILE: z.string().min(1).optional(),
  /** The claim mode (docs/claim-protocol.md#choosing-the-mode): auto follows what `schema --apply` recorded. */
  DFE_COORDINATION_CLAIMS: z.enum(['auto', 'keeper', 'tables']).default('auto'),
  DFE_KEDA_SHIM_HOST: z.string().trim().min(1).default('0.0.0.0'),
  DFE_KEDA_SHIM_PORT: port('DFE_KEDA_SHIM_PORT').default(8080),
  /** KEDA's external / external-push scaler over gRPC (docs/api.md#grpc): off unless a port is set. */
  DFE_KEDA_SHIM_GRPC_PORT: port('DFE_KEDA_SHIM_GRPC_PORT').optional(),
  /** How often the open StreamIsActive streams are checked (one query per distinct query + params). */
  DFE_KEDA_SHIM_GRPC_CHECK_INTERVAL_MS: positiveNumber.default(1_000),
  DFE_KEDA_SHIM_QUERY_CONFIG: z.string().min(1).optional(),
  DFE_KEDA_SHIM_BUILTIN_QUERIES: z.string().min(1).optional(),
  DFE_KEDA_SHIM_OTEL_DATABASE: databaseName.optional(),
  DFE_KEDA_SHIM_CACHE_MAX_KEYS: positiveInteger.default(10_000),
  DFE_KEDA_SHIM_RELOAD_INTERVAL_MS: positiveNumber.default(2_000),
  /** Directory of the last-good snapshot (docs/failsafe.md#snapshot-and-peers); unset: no snapshot. */
  DFE_KEDA_SHIM_SNAPSHOT_DIR: z.string().trim().min(1).optional(),
  DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS: positiveNumber.default(10_000),
  /** Comma-separated base URLs of the peer replicas; each host is resolved to all its addresses (a headless Service). */
  DFE_KEDA_SHIM_PEERS: peerUrls.optional(),
  DFE_KEDA_SHIM_PEER_TIMEOUT_MS: positiveNumber.default(250),
  DFE_KEDA_SHIM_MAX_QUERIES: positiveInteger.default(1_000),
  DFE_KEDA_SHIM_MAX_INFLIGHT: positiveInteger
    .refine((n) => n <= MAX_INFLIGHT_LIMIT, { message: `must be at most ${MAX_INFLIGHT_LIMIT} (the server client has 256 sockets)` })
    .optional(),
  DFE_KEDA_SHIM_MAX_INFLIGHT_PER_QUERY: positiveInteger.optional(),
  DFE_KEDA_SHIM_MAX_QUEUED: positiveInteger.refine((n) => n <= 1_000_000, { message: 'must be at most 1000000' }).optional(),
  DFE_KEDA_SHIM_AUTH_MODE: z.enum(['none', 'bearer', 'apiKey', 'basic']).default('none'),
  DFE_KEDA_SHIM_AUTH_TOKEN_FILE: z.string().min(1).optional(),
  DFE_KEDA_SHIM_AUTH_USERNAME_FILE: z.string().min(1).optional(),
  DFE_KEDA_SHIM_AUTH_PASSWORD_FILE: z.string().min(1).optional(),
  DFE_KEDA_SHIM_AUTH_API_KEY_HEADER: z
    .string()
    .trim()
    .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/, { message: 'must be an HTTP header name (KEDA keyParamName, method: header)' })
    .default('X-API-KEY'),
  DFE_KEDA_SHIM_AUTH_API_KEY_PARAM: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_.-]{1,100}$/, { message: 'must be a query parameter name of [A-Za-z0-9_.-] (KEDA keyParamName, method: query)' })
    .refine((name) => name !== 'hold', { message: 'must not be "hold" (the trigger target)' })
    .default('api_key'),
  DFE_KEDA_SHIM_TLS_CERT_FILE: z.string().min(1).optional(),
  DFE_KEDA_SHIM_TLS_CLIENT_CA_FILE: z.string().min(1).optional(),
  DFE_KEDA_SHIM_TLS_KEY_FILE: z.string().min(1).optional(),
  DFE_HUNTS_DIR: z.string().min(1).default('./hunts'),
  DFE_HUNTS_PHASE_SPREAD_FRACTION: z
    .string()
    .trim()
    .transform(Number)
    .refine((n) => Number.isFinite(n) && n > 0 && n <= 1, { message: 'must be a number in (0, 1]' })
    .default(0.8),
  DFE_HUNT_RUNNER_POLL_SECONDS: positiveNumber.default(15),
  DFE_HUNT_RUNNER_CAP: positiveInteger.default(8),
  DFE_HUNT_RUNNER_METRICS_PORT: port('DFE_HUNT_RUNNER_METRICS_PORT').default(9464),
  // 0.0.0.0 so kubelet probes reach the port.
  DFE_HUNT_RUNNER_METRICS_HOST: z.string().trim().min(1).default('0.0.0.0'),
  DFE_HUNT_RUNNER_LEASE_SECONDS: positiveNumber.default(300),
  DFE_HUNT_RUNNER_SETTLE_MS: positiveNumber.default(750),
  /** How long `stop()` waits for runs in flight before it abandons them, logged (docs/runner.md#stopping). */
  DFE_HUNT_RUNNER_STOP_DEADLINE_SECONDS: positiveNumber.default(5),
  DFE_HUNT_RUNNER_ID: z.string().trim().min(1).optional(),
  /** The longest window a run catches up after an outage; older data is skipped, loudly (docs/hunts.md#catch-up). */
  DFE_HUNT_MAX_CATCHUP_SECONDS: secondsOrDuration.default(86_400),
  // Load smoothing (docs/smoothing.md): observe by default (gauges, no moves); auto-disable is on by default.
  DFE_HUNT_SMOOTHING: z.enum(['off', 'observe', 'on'], { message: 'must be off, observe or on' }).default('observe'),
  DFE_HUNT_SMOOTHING_CYCLE_SECONDS: positiveNumber.default(300),
  DFE_HUNT_SMOOTHING_BUCKET_SECONDS: positiveInteger.default(30),
  DFE_HUNT_SMOOTHING_MAX_STEP_FRACTION: fraction.default(0.25),
  // Relative to the moved hunt's own part of J, so one default fits 200 and 10 000 hunts alike
  // (docs/smoothing.md "The controller"; the bench's fleets settle at peak/mean ≤ 1.2 with it).
  DFE_HUNT_SMOOTHING_HYSTERESIS: nonNegativeNumber.default(0.1),
  DFE_HUNT_SMOOTHING_COOLDOWN_CYCLES: nonNegativeInteger.default(3),
  DFE_HUNT_SMOOTHING_SETTLING_SECONDS: positiveInteger.default(604_800),
  DFE_HUNT_SMOOTHING_COST_WINDOW_SECONDS: positiveInteger.default(86_400),
  DFE_HUNT_SMOOTHING_MEMORY_CAP_BYTES: positiveInteger.optional(),
  DFE_HUNT_SMOOTHING_CPU_CORES: positiveNumber.optional(),
  DFE_HUNT_SMOOTHING_WEIGHTS: smoothingWeights.default({ cpu: 0.5, mem: 0.5 }),
  DFE_HUNT_AUTODISABLE_MEM_CRASHLOOP: crashloopRule.default({ failures: 3, windowSeconds: 3600 }),
  DFE_HUNT_AUTODISABLE_MAX_P95_MEMORY_BYTES: positiveInteger.optional(),
  DFE_HUNT_AUTODISABLE_MAX_P95_CPU_US: positiveInteger.optional(),
  DFE_HUNT_AUTODISABLE_MAX_P95_DURATION_MS: positiveInteger.optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),
});

export type ParsedEnv = z.output<typeof envSchema>;
