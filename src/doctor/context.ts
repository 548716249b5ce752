import type { ClickHouseClient } from '@clickhouse/client';
import type { Clock } from '../clock.js';
import type { AppConfig } from '../config/load.js';
import { describeError } from '../errors.js';
import type { ResolvedTopology } from '../coordination/tables.js';
import type { CoordinationSettings } from '../coordination/topology.js';
import type { HuntSpec } from '../schedule/hunt-spec.js';
import type { CheckResult } from './report.js';

/** Whose credentials the doctor runs with: the runner's (the default) or the shim's (read-only). */
export type DoctorRole = 'runner' | 'shim';

/** What every check reads: the open client and what was resolved once for all of them. */
export interface DoctorContext {
  readonly client: ClickHouseClient;
  readonly config: AppConfig;
  readonly role: DoctorRole;
  readonly clock: Clock;
  readonly database: string;
  /** Undefined when it could not be resolved (the topology check says why). */
  readonly topology: ResolvedTopology | undefined;
  readonly settings: CoordinationSettings;
  /** The hunts of DFE_HUNTS_DIR, or why they could not be read. */
  readonly hunts: readonly HuntSpec[] | { readonly error: string };
}

/**
 * An error as a check's detail. The messages an old server gives for what it lacks are named
 * as such, so a check on, say, ClickHouse 18.16 says what is missing instead of only echoing it.
 */
export function explain(err: unknown): string {
  const text = describeError(err);
  if (/Unknown setting param_/i.test(text)) return `this ClickHouse does not know query parameters (too old): ${text}`;
  if (/Unknown function/i.test(text)) return `this ClickHouse lacks a function the check needs (too old?): ${text}`;
  return text;
}

/** Runs one check; whatever it throws becomes a failing line with `fix`, never a crash. */
export async function guarded(name: string, fix: string, check: () => Promise<CheckResult>): Promise<CheckResult> {
  try {
    return await check();
  } catch (err) {
    return { name, status: 'fail', detail: explain(err), fix };
  }
}

/** The rows of a JSONEachRow query with bound parameters. */
export async function rows<T>(ctx: DoctorContext, query: string, params?: Record<string, unknown>): Promise<T[]> {
  const rs = await ctx.client.query({ query, format: 'JSONEachRow', ...(params ? { query_params: params } : {}), clickhouse_settings: ctx.settings.read });
  return rs.json<T>();
}
