import { probeKeeperMap, readClaimMode } from '../coordination/claims/mode.js';
import { explain, guarded, rows, type DoctorContext } from './context.js';
import type { CheckResult } from './report.js';

/**
 * The checks of the server itself (docs/operations.md#doctor): version, Keeper and the claim
 * mode `auto` picks, the span log, clock skew, `max_execution_time`.
 */

/** The oldest ClickHouse the runner's SQL is written for: DateTime64, query parameters, KeeperMap, `insert_quorum = 'auto'`. */
export const MINIMUM_SERVER_VERSION = Object.freeze([23, 8] as const);
/** Above this |pod − server| clock difference the doctor warns (lateness and logs read the pod's clock). */
export const CLOCK_SKEW_WARN_MS = 2_000;
const MIN_TEXT = MINIMUM_SERVER_VERSION.join('.');

export function versionAtLeast(version: string, minimum: readonly [number, number]): boolean {
  const [major = 0, minor = 0] = version.split('.').map((p) => Number.parseInt(p, 10));
  return major > minimum[0] || (major === minimum[0] && minor >= minimum[1]);
}

export function serverVersion(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'server version';
  return guarded(name, 'check DFE_CLICKHOUSE_URL and the credentials; the server must answer SELECT version()', async () => {
    const [row] = await rows<{ v: string }>(ctx, 'SELECT version() AS v');
    const version = row?.v ?? 'unknown';
    if (versionAtLeast(version, MINIMUM_SERVER_VERSION)) return { name, status: 'ok', detail: `ClickHouse ${version}` };
    return {
      name,
      status: 'fail',
      detail: `ClickHouse ${version} is older than ${MIN_TEXT}, the oldest the runner's SQL is written for (query parameters, DateTime64, KeeperMap)`,
      fix: `upgrade ClickHouse to ${MIN_TEXT} or later`,
    };
  });
}

/**
 * Keeper and KeeperMap: which claim mode `auto` picks (docs/claim-protocol.md#choosing-the-mode),
 * by the runner's own probe. As the shim (read-only), only the recorded mode.
 */
export function claimMode(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'keeper / claim mode';
  const setting = ctx.config.runner.claims;
  return guarded(name, 'fix the server (see the keeper line), then run `dfe-hunt-runner schema --apply`', async () => {
    const recorded = await readClaimMode(ctx.client, ctx.database, ctx.settings.read);
    if (ctx.role === 'shim') {
      if (recorded) return { name, status: 'ok', detail: `${recorded} (recorded in hunt_coordination; not probed: the shim's user is read-only)` };
      return { name, status: 'warn', detail: 'none recorded in hunt_coordination', fix: 'run `dfe-hunt-runner schema --apply` with the runner\'s user' };
    }
    if (setting === 'tables') return { name, status: 'ok', detail: 'tables (DFE_COORDINATION_CLAIMS=tables)' };
    if (!ctx.topology) return { name, status: 'fail', detail: 'not probed: the topology is unknown (see the topology line)', fix: 'fix the topology line first' };
    // The probe creates hunt_claim if missing and writes and deletes one key of its own, as a runner's start does.
    const probe = await probeKeeperMap(ctx.client, ctx.database, ctx.topology);
    const why = probe.reason ? ` (KeeperMap: ${probe.reason})` : '';
    const keeperFix = 'configure <keeper_map_path_prefix> and Keeper on the server (docs/claim-protocol.md#keeper-mode)';
    if (setting === 'keeper') {
      return probe.mode === 'keeper'
        ? { name, status: 'ok', detail: 'keeper (DFE_COORDINATION_CLAIMS=keeper; KeeperMap works)' }
        : { name, status: 'fail', detail: `DFE_COORDINATION_CLAIMS=keeper, but KeeperMap does not work${why}`, fix: `${keeperFix}, or set DFE_COORDINATION_CLAIMS=auto` };
    }
    if (recorded === 'keeper' && probe.mode !== 'keeper') {
      return { name, status: 'fail', detail: `keeper is recorded, but KeeperMap does not work now${why}: runners skip their ticks`, fix: keeperFix };
    }
    if (recorded) {
      const note = recorded !== probe.mode ? `; the probe finds ${probe.mode} now, so \`schema --apply\` would record ${probe.mode}` : '';
      return { name, status: recorded === 'keeper' ? 'ok' : 'warn', detail: `auto follows the recorded ${recorded}${note}${why}`, ...(recorded === 'keeper' ? {} : { fix: keeperFix }) };
    }
    return probe.mode === 'keeper'
      ? { name, status: 'ok', detail: 'none recorded; auto would pick keeper (KeeperMap works)' }
      : { name, status: 'warn', detail: `none recorded; auto would pick tables${why}`, fix: keeperFix };
  });
}

export function spanLog(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'span log';
  const fix = 'enable <opentelemetry_span_log> in the server config for the traces join of docs/operations.md#traces';
  return guarded(name, fix, async () => {
    const [row] = await rows<{ n: number | string }>(ctx, "SELECT count() AS n FROM system.tables WHERE database = 'system' AND name = 'opentelemetry_span_log'");
    return Number(row?.n ?? 0) > 0
      ? { name, status: 'ok', detail: 'system.opentelemetry_span_log exists' }
      : { name, status: 'warn', detail: 'system.opentelemetry_span_log does not exist (it appears with the first traced query, if enabled)', fix };
  });
}

/** Pod clock minus server clock, from one round trip; the server's second has 1 s resolution. */
export function clockSkew(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'clock skew';
  return guarded(name, 'check that the server answers SELECT now()', async () => {
    const before = ctx.clock.nowMs();
    const [row] = await rows<{ s: number | string }>(ctx, 'SELECT toUInt32(toUnixTimestamp(now())) AS s');
    const after = ctx.clock.nowMs();
    const serverMs = (Number(row?.s) + 0.5) * 1000;
    const skewMs = Math.round((before + after) / 2 - serverMs);
    const errorMs = Math.round(500 + (after - before) / 2);
    const detail = `pod − server ≈ ${skewMs} ms (± ${errorMs} ms)`;
    if (Math.abs(skewMs) - errorMs <= CLOCK_SKEW_WARN_MS) return { name, status: 'ok', detail };
    return { name, status: 'warn', detail: `${detail}, above ${CLOCK_SKEW_WARN_MS} ms`, fix: 'sync the node and the server to NTP (the runner reads due times from the server clock; the pod clock dates logs and lateness)' };
  });
}

const SLEEP_SECONDS = 3;
const LIMIT_SECONDS = 1;

/** A query that sleeps past a short `max_execution_time` must be cut: the shim's deadlines rely on it. */
export function maxExecutionTime(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'max_execution_time';
  const fix = "let the users change max_execution_time per query: readonly = 2, not 1, and no CONSTRAINTS pinning it (docs/clickhouse-users.md)";
  return guarded(name, fix, async () => {
    try {
      const rs = await ctx.client.query({
        query: `SELECT sleep(${SLEEP_SECONDS}) AS s`,
        format: 'JSONEachRow',
        clickhouse_settings: { max_execution_time: LIMIT_SECONDS },
      });
      await rs.json();
    } catch (err) {
      const text = explain(err);
      if (/TIMEOUT_EXCEEDED|Timeout exceeded|Code: 159/i.test(text)) {
        return { name, status: 'ok', detail: `a ${SLEEP_SECONDS} s query was cut at max_execution_time = ${LIMIT_SECONDS}` };
      }
      return { name, status: 'fail', detail: `setting max_execution_time per query failed: ${text}`, fix };
    }
    return { name, status: 'fail', detail: `a ${SLEEP_SECONDS} s query ran to its end under max_execution_time = ${LIMIT_SECONDS}`, fix };
  });
}
