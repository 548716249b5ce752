/**
 * The external tools the tests drive (helm, kubeconform, shellcheck, openssl, promtool), where
 * they are, and thin wrappers that run them. The .ci/install-*.sh scripts install them; a test
 * whose tool is missing goes through test/helpers/requirement.ts (`needs(missing(…))`): a
 * printed skip on a laptop, a failure with the install hint under CI=true.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { coreSchemas, crdSchemas, writeSchemas } from '../chart/k8s-schemas.js';

export const REPO = resolve(import.meta.dirname, '..', '..');
export const CHART = join(REPO, 'charts', 'dfe-keda-shim');
const TOOLS_BIN = join(REPO, '.tools', 'bin');
const OPENAPI_SPEC = process.env.DFE_K8S_OPENAPI_SPEC ?? join(REPO, '.tools', 'openapi', 'swagger.json');
/** KEDA's and the prometheus-operator's CRDs, vendored next to these tests (crds/README.md). */
const CRDS = process.env.DFE_KEDA_CRDS_DIR ?? join(REPO, 'test', 'chart', 'crds');
/** The Kubernetes version of the OpenAPI spec the install script fetches; helm renders for it. */
export const KUBE_VERSION = '1.37.2';

const CHART_TOOLS = 'run `bash .ci/install-chart-tools.sh` (go install from the Go proxy, shellcheck from apt)';
const HOW_TO_INSTALL = {
  helm: CHART_TOOLS,
  kubeconform: CHART_TOOLS,
  shellcheck: CHART_TOOLS,
  openApiSpec: CHART_TOOLS,
  crdsDir: 'the vendored CRDs are missing from test/chart/crds (or DFE_KEDA_CRDS_DIR names a missing directory)',
  openssl: 'install the openssl CLI (`apt-get install openssl`)',
  promtool: 'run `bash .ci/install-promtool.sh` (go install from the Go module proxy into .tools/bin)',
} as const;

/**
 * .tools/bin first, then PATH. `DFE_TEST_<NAME>_BIN` (e.g. DFE_TEST_HELM_BIN) names the binary
 * to use instead; a path that does not exist hides the tool, to see what a machine without it does.
 */
export function findTool(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const forced = env[`DFE_TEST_${name.toUpperCase()}_BIN`];
  if (forced !== undefined && forced !== '') return existsSync(forced) ? forced : undefined;
  const candidates = [join(TOOLS_BIN, name), ...(env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, name))];
  return candidates.find((path) => existsSync(path));
}

export const tools = {
  helm: findTool('helm'),
  kubeconform: findTool('kubeconform'),
  shellcheck: findTool('shellcheck'),
  openssl: findTool('openssl'),
  promtool: findTool('promtool'),
  openApiSpec: existsSync(OPENAPI_SPEC) ? OPENAPI_SPEC : undefined,
  crdsDir: existsSync(CRDS) ? CRDS : undefined,
};

/** Why a group of tests cannot run here (what is missing and how to install it), or undefined when it can. */
export function missing(...needs: (keyof typeof tools)[]): string | undefined {
  const absent = needs.filter((need) => !tools[need]);
  if (absent.length === 0) return undefined;
  const hints = [...new Set(absent.map((need) => HOW_TO_INSTALL[need]))];
  return `missing ${absent.join(', ')}: ${hints.join('; ')}`;
}

export interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function run(command: string, args: readonly string[], input?: string): Run {
  const result = spawnSync(command, args, { input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
} & Record<
  string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  any
>;

/** `helm template` of a chart with the given values (as a JSON values file, so types survive). */
export function helmTemplate(values: object, chart = CHART, extraArgs: readonly string[] = []): { yaml: string; manifests: Manifest[] } {
  const result = run(tools.helm!, [
    'template', 'rel', chart,
    '--namespace', 'dfe',
    '--kube-version', KUBE_VERSION,
    '--values', '-',
    ...extraArgs,
  ], JSON.stringify(values));
  if (result.status !== 0) throw new Error(`helm template failed (${result.status}): ${result.stderr}`);
  const manifests = parseAllDocuments(result.stdout)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors[0]!.message}`);
      return doc.toJS() as Manifest | null;
    })
    .filter((doc): doc is Manifest => doc !== null);
  return { yaml: result.stdout, manifests };
}

/** Writes the core, KEDA and prometheus-operator schemas once into a temp dir; returns kubeconform's location template. */
export function prepareSchemas(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dfe-k8s-schemas-'));
  writeSchemas(dir, coreSchemas(JSON.parse(readFileSync(tools.openApiSpec!, 'utf8'))));
  const crds = readdirSync(tools.crdsDir!)
    .filter((file) => file.endsWith('.yaml'))
    .flatMap((file) => parseAllDocuments(readFileSync(join(tools.crdsDir!, file), 'utf8')).map((doc) => doc.toJS()));
  writeSchemas(dir, crdSchemas(crds));
  return `${dir}/{{ .ResourceKind }}{{ .KindSuffix }}.json`;
}

export interface KubeconformResource {
  readonly kind: string;
  readonly name: string;
  readonly status: string;
  readonly msg: string;
}

/** kubeconform -strict over a multi-document YAML stream; every object must be valid. */
export function kubeconform(schemaLocation: string, yamlText: string): { status: number | null; resources: KubeconformResource[]; raw: string } {
  const result = run(tools.kubeconform!, ['-strict', '-summary', '-verbose', '-output', 'json', '-schema-location', schemaLocation, '-'], yamlText);
  const parsed = JSON.parse(result.stdout || '{"resources":[]}') as { resources?: KubeconformResource[] };
  return { status: result.status, resources: parsed.resources ?? [], raw: result.stdout + result.stderr };
}

export const byKind = (manifests: Manifest[], kind: string) => manifests.filter((m) => m.kind === kind);
