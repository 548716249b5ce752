/**
 * Both programs as they run in production — the compiled CLIs, each on its own embedded
 * ClickHouse (libchdb allows one process per data directory) — scraped live:
 *  - `promtool check metrics` on each /metrics: a real exposition parser and Prometheus'
 *    naming lint, which must report nothing;
 *  - every metric name in the Grafana dashboard's expressions (read with Prometheus' PromQL
 *    grammar) must be one the programs export, except the ones listed as pending below.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { REPO } from '../helpers/tools.js';
import { exportedSampleNames } from './exposition.js';
import { parsePromql } from './promql.js';
import { promtoolMissing, runPromtool } from './promtool.js';
import { needs } from '../helpers/requirement.js';

/**
 * Dashboard metrics the code does not export yet, in one place (empty since load smoothing,
 * docs/smoothing.md, landed); each test run prints which are still pending, and says so
 * when one appears in the scrape so it can leave this list.
 */
export const PENDING_METRICS: readonly string[] = [];

const DASHBOARD = join(REPO, 'charts', 'dfe-keda-shim', 'dashboards', 'dfe-keda-shim.json');
const scratch = mkdtempSync(join(tmpdir(), 'dfe-scrape-'));
const children: ChildProcess[] = [];
const scrapes = { shim: '', runner: '' };

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) out[key] = value;
  return { ...out, LOG_LEVEL: 'warn', ...extra };
}

function launch(cli: string, args: string[], extraEnv: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, [join(REPO, 'dist', 'src', 'cli', cli), ...args], { env: env(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) console.warn(`[scrape] ${cli} exited ${code}: ${output.slice(-1500)}`);
  });
  children.push(child);
  return child;
}

/** Bounded wait for a condition over HTTP (not a timing assertion: a failure names what never came). */
async function waitFor(what: string, probe: () => Promise<boolean>, attempts = 300): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`never happened: ${what}`);
}

beforeAll(async () => {
  const hunts = join(scratch, 'hunts');
  spawnSync('mkdir', ['-p', hunts]);
  writeFileSync(join(hunts, 'minutely.yaml'), 'schedule: {mode: rate, interval: 1m}\nqueries: ["SELECT {window_end:Int64}"]\n');
  const runnerDb = join(scratch, 'runner-ch');
  const schema = spawnSync(process.execPath, [join(REPO, 'dist', 'src', 'cli', 'hunt-runner.js'), 'schema', '--apply', '--embedded-path', runnerDb, '--hunts', hunts], {
    env: env({}),
    encoding: 'utf8',
  });
  expect(schema.status, schema.stderr).toBe(0);

  const [runnerPort, shimPort] = [await freePort(), await freePort()];
  launch('hunt-runner.js', ['run', '--embedded-path', runnerDb, '--hunts', hunts, '--poll', '0.5', '--metrics-port', String(runnerPort), '--metrics-host', '127.0.0.1']);
  launch('shim.js', ['--port', String(shimPort), '--host', '127.0.0.1', '--embedded-path', join(scratch, 'shim-ch')]);
  const runner = `http://127.0.0.1:${runnerPort}`;
  const shim = `http://127.0.0.1:${shimPort}`;

  // Some traffic, so labelled series have samples too: a run of the hunt; the shim's built-in
  // queries (no coordination tables in its database, so they go the fail-safe path).
  await waitFor('a succeeded hunt run on the runner', async () => /^dfe_hunt_runs_total\{.*outcome="succeeded"\} [1-9]/m.test(await (await fetch(`${runner}/metrics`)).text()));
  await waitFor('the shim answering', async () => (await fetch(`${shim}/readyz`)).ok);
  for (const path of ['/keda/hunt-backlog', '/keda/pressure?service=demo&hold=70', '/q/backlog', '/q/nope']) await fetch(`${shim}${path}`);
  scrapes.runner = await (await fetch(`${runner}/metrics`)).text();
  scrapes.shim = await (await fetch(`${shim}/metrics`)).text();
}, 120_000);

afterAll(async () => {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }),
  );
  rmSync(scratch, { recursive: true, force: true });
});

needs(promtoolMissing()).describe('promtool check metrics', () => {
  it.each(['shim', 'runner'] as const)('the %s exposition parses and has no lint finding', (program) => {
    expect(scrapes[program]).toMatch(program === 'shim' ? /^dfe_keda_shim_requests_total\{/m : /^dfe_hunt_runs_total\{/m);
    const result = runPromtool(['check', 'metrics'], scrapes[program]);
    expect(result.output.trim(), `promtool check metrics (${program})`).toBe('');
    expect(result.status).toBe(0);
  });

  it('is not vacuous: it reports a badly named metric', () => {
    const bad = '# HELP dfe_bad_requests a counter without _total\n# TYPE dfe_bad_requests counter\ndfe_bad_requests 1\n';
    const result = runPromtool(['check', 'metrics'], bad);
    expect(result.status).not.toBe(0);
    expect(result.output).toMatch(/dfe_bad_requests/);
  });
});

interface Panel {
  readonly title?: string;
  readonly type?: string;
  readonly targets?: { readonly expr?: string }[];
  readonly panels?: Panel[];
}
interface Dashboard {
  readonly panels: Panel[];
  readonly templating: { list: { name: string; query?: string | { query?: string } }[] };
}

/** Every PromQL expression of the dashboard, with where it is. */
function dashboardExpressions(dashboard: Dashboard): { where: string; expr: string }[] {
  const out: { where: string; expr: string }[] = [];
  const walk = (panels: Panel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) if (target.expr) out.push({ where: `panel "${panel.title}"`, expr: target.expr });
      walk(panel.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    const selector = query && /^label_values\((.+),\s*\w+\)$/.exec(query)?.[1];
    if (selector) out.push({ where: `variable $${variable.name}`, expr: selector });
  }
  return out;
}

describe('the Grafana dashboard against a live scrape of both programs', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  const expressions = dashboardExpressions(dashboard);

  it('every expression is valid PromQL', () => {
    const broken = expressions.map((e) => ({ ...e, errorsAt: parsePromql(e.expr).errorsAt })).filter((e) => e.errorsAt.length > 0);
    expect(broken).toEqual([]);
  });

  it('every metric name a panel or variable selects is exported (or listed as pending)', () => {
    const exported = new Set([...exportedSampleNames(scrapes.shim), ...exportedSampleNames(scrapes.runner)]);
    const used = new Map<string, string[]>();
    for (const { where, expr } of expressions) for (const metric of parsePromql(expr).metrics) used.set(metric, [...(used.get(metric) ?? []), where]);
    const missing = [...used.keys()].filter((m) => !exported.has(m) && !PENDING_METRICS.includes(m));
    expect(missing.map((m) => `${m} (${used.get(m)!.join(', ')})`)).toEqual([]);

    const pendingUsed = PENDING_METRICS.filter((m) => used.has(m));
    const nowExported = pendingUsed.filter((m) => exported.has(m));
    const stillPending = pendingUsed.filter((m) => !exported.has(m));
    const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row').length;
    console.info(
      `[dashboard] ${panels} panels, ${expressions.length} expressions, ${used.size} metric names: ` +
        `${used.size - stillPending.length} found in the live scrapes, ${stillPending.length} pending: ${stillPending.join(', ') || 'none'}`,
    );
    if (nowExported.length > 0) console.info(`[dashboard] now exported, remove from PENDING_METRICS: ${nowExported.join(', ')}`);
    // Pending names are only for panels that wait for them, not a place to park typos.
    expect(PENDING_METRICS.filter((m) => !used.has(m))).toEqual([]);
  });

  it('the check is not vacuous: a misspelt metric is caught', () => {
    const exported = new Set([...exportedSampleNames(scrapes.shim), ...exportedSampleNames(scrapes.runner)]);
    expect(exported.has('dfe_hunt_backlog')).toBe(true);
    expect(exported.has('dfe_keda_shim_clickhouse_query_duration_seconds_bucket')).toBe(true);
    const [misspelt] = parsePromql('sum(rate(dfe_hunt_run_total{namespace=~"$namespace"}[$__rate_interval]))').metrics;
    expect(misspelt).toBe('dfe_hunt_run_total');
    expect(exported.has(misspelt!)).toBe(false);
  });
});
