/**
 * issue 28 part 2: the shipped dashboard and the alert rules have data from the first scrape.
 * A fresh demo (the built entry `npm start` runs: runner and shim in one process on the
 * embedded engine) is scraped once, right after its banner and before any request; every
 * metric name a dashboard panel, a dashboard variable or an alert rule selects (read with
 * Prometheus' PromQL grammar) must have at least one sample in one of the two scrapes — a
 * HELP/TYPE line alone is a panel with "no data".
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../helpers/ports.js';
import { REPO } from '../helpers/tools.js';
import { parsePromql } from '../monitoring/promql.js';

/** Series other exporters provide (kube-state-metrics), not the programs. */
const EXTERNAL_METRICS: readonly string[] = ['kube_job_failed'];

const scratch = mkdtempSync(join(tmpdir(), 'dfe-first-scrape-'));
let demo: ChildProcess | undefined;
let output = '';
const scrapes = { shim: '', runner: '' };

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
  return { ...env, ...extra };
}

beforeAll(async () => {
  const [shimPort, metricsPort, grpcPort] = [await freePort(), await freePort(), await freePort()];
  demo = spawn(process.execPath, [join(REPO, 'dist', 'src', 'cli', 'demo.js')], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: childEnv({
      DFE_EMBEDDED_PATH: join(scratch, 'db'),
      DFE_KEDA_SHIM_PORT: String(shimPort),
      DFE_HUNT_RUNNER_METRICS_PORT: String(metricsPort),
      DFE_KEDA_SHIM_GRPC_PORT: String(grpcPort),
    }),
  });
  demo.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  demo.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // Bounded wait for the banner (schema, demo tables, runner and shim up): not a timing assertion.
  for (let i = 0; i < 600 && !output.includes('Ctrl-C stops it') && demo.exitCode === null; i++) await new Promise((resolve) => setTimeout(resolve, 200));
  expect(output.slice(-3000), 'the demo never printed its banner').toContain('Ctrl-C stops it');
  scrapes.shim = await (await fetch(`http://127.0.0.1:${shimPort}/metrics`)).text();
  scrapes.runner = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
}, 180_000);

afterAll(async () => {
  if (demo && demo.exitCode === null && demo.signalCode === null) {
    const exited = new Promise((resolve) => demo!.once('exit', resolve));
    demo.kill('SIGTERM');
    const timer = setTimeout(() => demo!.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(scratch, { recursive: true, force: true });
});

/** Names with at least one sample line (not only `# HELP`/`# TYPE`). */
function sampledNames(exposition: string): Set<string> {
  return new Set([...exposition.matchAll(/^([A-Za-z_:][\w:]*)[{ ]/gm)].map((m) => m[1]!));
}

/** Every PromQL expression of the dashboard (panels, nested rows, label_values variables) and the alert rules. */
function usedExpressions(): { where: string; expr: string }[] {
  interface Panel {
    title?: string;
    targets?: { expr?: string }[];
    panels?: Panel[];
  }
  const out: { where: string; expr: string }[] = [];
  const dashboards = join(REPO, 'charts', 'dfe-keda-shim', 'dashboards');
  for (const file of readdirSync(dashboards).filter((f) => f.endsWith('.json'))) {
    const dashboard = JSON.parse(readFileSync(join(dashboards, file), 'utf8')) as { panels: Panel[]; templating?: { list: { name: string; query?: unknown }[] } };
    const walk = (panels: Panel[]) => {
      for (const panel of panels) {
        for (const target of panel.targets ?? []) if (target.expr) out.push({ where: `${file} panel "${panel.title}"`, expr: target.expr });
        walk(panel.panels ?? []);
      }
    };
    walk(dashboard.panels);
    for (const variable of dashboard.templating?.list ?? []) {
      const query = typeof variable.query === 'string' ? variable.query : (variable.query as { query?: string } | undefined)?.query;
      const selector = query && /^label_values\((.+),\s*\w+\)$/.exec(query)?.[1];
      if (selector) out.push({ where: `${file} variable $${variable.name}`, expr: selector });
    }
  }
  const rules = parse(readFileSync(join(REPO, 'monitoring', 'alerts.yaml'), 'utf8')) as { groups: { rules: { alert?: string; record?: string; expr: string }[] }[] };
  for (const rule of rules.groups.flatMap((g) => g.rules)) out.push({ where: `alert ${rule.alert ?? rule.record}`, expr: rule.expr });
  return out;
}

describe('a fresh demo, scraped once', () => {
  it('has a sample of every metric the dashboard and the alert rules select', () => {
    const sampled = new Set([...sampledNames(scrapes.shim), ...sampledNames(scrapes.runner)]);
    const used = new Map<string, string[]>();
    for (const { where, expr } of usedExpressions()) for (const metric of parsePromql(expr).metrics) used.set(metric, [...(used.get(metric) ?? []), where]);
    expect(used.size).toBeGreaterThan(20);
    const missing = [...used.keys()].filter((m) => !sampled.has(m) && !EXTERNAL_METRICS.includes(m));
    expect(missing.map((m) => `${m} (${used.get(m)!.join('; ')})`)).toEqual([]);
    expect(EXTERNAL_METRICS.filter((m) => !used.has(m)), 'an external name no rule uses any more').toEqual([]);
  });

  it('has the per-hunt series at 0 for each example hunt, and the per-query ones for each built-in query', () => {
    const hunts = readdirSync(join(REPO, 'examples', 'hunts')).filter((f) => f.endsWith('.yaml')).map((f) => f.replace(/\.yaml$/, ''));
    expect(hunts.length).toBeGreaterThan(0);
    for (const hunt of hunts) {
      expect(scrapes.runner).toMatch(new RegExp(`^dfe_hunt_autodisabled\\{hunt_id="${hunt}",reason="[a-z_]+"\\} 0$`, 'm'));
      expect(scrapes.runner).toMatch(new RegExp(`^dfe_hunt_phase_shift_total\\{hunt_id="${hunt}"\\} 0$`, 'm'));
    }
    for (const query of ['backlog', 'pressure']) expect(scrapes.shim).toMatch(new RegExp(`^dfe_keda_shim_requests_total\\{query="${query}",source="fresh"\\} \\d+$`, 'm'));
  });

  it('the comparison is not vacuous: a name only declared (HELP/TYPE) does not count as sampled', () => {
    expect(sampledNames('# HELP x_total a\n# TYPE x_total counter\n').has('x_total')).toBe(false);
    expect(sampledNames('x_total{a="1"} 0\n').has('x_total')).toBe(true);
  });
});
