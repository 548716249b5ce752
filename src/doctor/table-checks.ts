import { checkOutputDedup, dedupFix, describeFinding, withoutDedup, type OutputDedupFinding } from '../coordination/output-dedup.js';
import { dueTickSql } from '../coordination/due-sql.js';
import { qualifiedTable } from '../clickhouse/identifiers.js';
import { TABLES } from '../coordination/tables.js';
import { explain, guarded, rows, type DoctorContext } from './context.js';
import { describeNeeds, missingGrants } from './grants.js';
import { expectedColumns, grantNeeds } from './needs.js';
import type { CheckResult } from './report.js';

/**
 * The checks of what lives in the server (docs/operations.md#doctor): grants, the coordination
 * schema, the due query's latency, each hunt's output tables.
 */

/** Above this the due query (run every poll by every runner) warns. */
export const DUE_QUERY_WARN_MS = 1_000;

const APPLY_SCHEMA = 'run `dfe-hunt-runner schema --apply` with the runner\'s user (the chart\'s materialise Job does)';

async function grantLines(ctx: DoctorContext): Promise<string[]> {
  const read = async (query: string) => (await (await ctx.client.query({ query, format: 'TabSeparatedRaw' })).text()).split('\n').filter((l) => l !== '');
  // FINAL folds in the privileges of the user's roles (ClickHouse 22.x and later).
  return read('SHOW GRANTS FINAL').catch(() => read('SHOW GRANTS'));
}

export function grants(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'grants';
  return guarded(name, 'the user needs the grants of docs/clickhouse-users.md', async () => {
    let who: { user: string; db: string } | undefined;
    let lines: string[];
    try {
      [who] = await rows<{ user: string; db: string }>(ctx, 'SELECT currentUser() AS user, currentDatabase() AS db');
      lines = await grantLines(ctx);
    } catch (err) {
      const user = ctx.config.clickhouse.username;
      return { name, status: 'warn', detail: `cannot read the grants of user ${user}: ${explain(err)}`, fix: 'check the grants by hand against docs/clickhouse-users.md' };
    }
    const user = who?.user ?? ctx.config.clickhouse.username;
    const scope =
      ctx.role === 'runner'
        ? `user ${user} as the runner's (one user per run: run \`doctor --as shim\` with the shim's credentials to check its)`
        : `user ${user} as the shim's`;
    const hunts = 'error' in ctx.hunts ? [] : ctx.hunts;
    const needs = grantNeeds({
      role: ctx.role,
      database: ctx.database,
      otelDatabase: ctx.config.clickhouse.otelDatabase,
      hunts,
      currentDatabase: who?.db ?? 'default',
      backlogRefreshSeconds: ctx.config.clickhouse.backlogRefreshSeconds,
    });
    const missing = missingGrants(lines, needs);
    if (missing.length === 0) return { name, status: 'ok', detail: `${scope}: all ${needs.length} needed privilege(s) granted` };
    const described = describeNeeds(missing);
    return {
      name,
      status: 'fail',
      detail: `${scope} lacks ${described.join('; ')}`,
      fix: described.map((d) => `GRANT ${d} TO ${user}`).join('; '),
    };
  });
}

export function coordinationSchema(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'coordination schema';
  return guarded(name, APPLY_SCHEMA, async () => {
    const expected = expectedColumns();
    const found = await rows<{ table: string; name: string }>(
      ctx,
      'SELECT table, name FROM system.columns WHERE database = {db:String} AND has({tables:Array(String)}, table)',
      { db: ctx.database, tables: [...expected.keys()] },
    );
    const have = new Map<string, Set<string>>();
    for (const r of found) have.set(r.table, (have.get(r.table) ?? new Set()).add(r.name));
    const problems: string[] = [];
    for (const [table, columns] of expected) {
      const present = have.get(table);
      if (!present) problems.push(`${table} missing`);
      else {
        const lacking = columns.filter((c) => !present.has(c));
        if (lacking.length > 0) problems.push(`${table} lacks ${lacking.join(', ')}`);
      }
    }
    if (problems.length === 0) return { name, status: 'ok', detail: `${expected.size} tables in ${ctx.database}, every column present` };
    return { name, status: 'fail', detail: `${ctx.database}: ${problems.join('; ')}`, fix: APPLY_SCHEMA };
  });
}

/** The runner's one due query per tick (coordination/due-sql.ts), timed at the current schedule size. */
export function dueLatency(ctx: DoctorContext): Promise<CheckResult> {
  const name = 'due query';
  return guarded(name, `${APPLY_SCHEMA}; then check the server's load`, async () => {
    const [size] = await rows<{ n: number | string }>(ctx, `SELECT count() AS n FROM ${qualifiedTable(ctx.database, TABLES.schedule)} FINAL WHERE enabled = 1`);
    const started = ctx.clock.monotonicMs();
    const [tick] = await rows<{ backlog: number | string }>(ctx, dueTickSql(ctx.database));
    const ms = Math.round(ctx.clock.monotonicMs() - started);
    const detail = `${ms} ms at ${Number(size?.n ?? 0)} scheduled hunt(s), ${Number(tick?.backlog ?? 0)} due now`;
    if (ms <= DUE_QUERY_WARN_MS) return { name, status: 'ok', detail };
    return {
      name,
      status: 'warn',
      detail: `${detail}: above ${DUE_QUERY_WARN_MS} ms, and every runner runs it every poll`,
      fix: 'give the server more CPU or fewer hunts per database; docs/tables.md#the-due-query',
    };
  });
}

/** Each hunt's output tables deduplicate a repeated insert (docs/claim-protocol.md): one line per table that does not. */
export async function outputDedup(ctx: DoctorContext): Promise<CheckResult[]> {
  const name = 'output dedup';
  if ('error' in ctx.hunts) {
    // The shim's pod mounts no hunts: there the line only says where to look.
    const status = ctx.role === 'shim' ? 'warn' : 'fail';
    return [{ name, status, detail: `hunts not read: ${ctx.hunts.error}`, fix: 'set DFE_HUNTS_DIR (or --hunts) to the hunts directory, or run doctor where the runner runs' }];
  }
  const hunts = ctx.hunts;
  let findings: OutputDedupFinding[];
  try {
    findings = await checkOutputDedup(ctx.client, hunts, ctx.settings.read);
  } catch (err) {
    return [{ name, status: 'fail', detail: explain(err), fix: 'the user needs to read system.tables and system.merge_tree_settings' }];
  }
  const lacking = withoutDedup(findings);
  if (lacking.length === 0) return [{ name, status: 'ok', detail: `${findings.length} output table(s) of ${hunts.length} hunt(s) deduplicate repeated inserts` }];
  return lacking.map((f) => ({
    name: `${name} ${f.huntId}`,
    status: f.verdict.kind === 'unknown' ? 'warn' : 'fail',
    detail: `${describeFinding(f)}; a window run twice would write its rows twice`,
    fix: dedupFix(f),
  }));
}
