/**
 * issue 28 part 4: `helm test`. The hook Pod is rendered and validated like every other object
 * (the shim image, the release's ServiceAccount, the pods' security settings, KEDA's
 * credentials), and what it runs — `dfe-keda-shim check`, the compiled CLI — is run here with
 * the env the rendered Pod sets, against a real shim process on the embedded engine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { byKind, helmTemplate, kubeconform, missing, prepareSchemas, REPO, type Manifest } from '../helpers/tools.js';
import { freePort } from '../helpers/ports.js';
import { needs } from '../helpers/requirement.js';

const CH = { clickhouse: { url: 'https://clickhouse.example:8443', existingSecret: 'ch-password' } };
const skip = missing('helm');
const skipValidation = skip ?? missing('kubeconform', 'openApiSpec', 'crdsDir');

const testPods = (values: object): Manifest[] => byKind(helmTemplate(values).manifests, 'Pod').filter((p) => p.metadata.annotations?.['helm.sh/hook'] === 'test');
const testPod = (values: object): Manifest => {
  const pods = testPods(values);
  expect(pods).toHaveLength(1);
  return pods[0]!;
};
type Container = { name: string; image: string; args: string[]; env: { name: string; value?: string }[]; securityContext: unknown; volumeMounts: { name: string; mountPath: string }[] };
const containerOf = (pod: Manifest, name: string): Container => pod.spec.containers.find((c: Container) => c.name === name);
const envOf = (c: Container) => Object.fromEntries(c.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));

needs(skip).describe('the helm test hook Pod, rendered', () => {
  it('runs the shim image as the release ServiceAccount, non-root, secured like the shim pods, as a test hook', () => {
    const { manifests } = helmTemplate(CH);
    const shim = byKind(manifests, 'Deployment').find((d) => d.metadata.name.endsWith('-shim'))!;
    const pod = testPod(CH);
    expect(pod.metadata.annotations).toEqual({ 'helm.sh/hook': 'test', 'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded' });
    expect(pod.spec.serviceAccountName).toBe(shim.spec.template.spec.serviceAccountName);
    expect(pod.spec.securityContext).toEqual(shim.spec.template.spec.securityContext);
    expect(pod.spec.securityContext.runAsNonRoot).toBe(true);
    expect({ links: pod.spec.enableServiceLinks, token: pod.spec.automountServiceAccountToken, restart: pod.spec.restartPolicy }).toEqual({ links: false, token: false, restart: 'Never' });
    const shimContainer = shim.spec.template.spec.containers[0];
    for (const name of ['shim-check', 'doctor']) {
      const c = containerOf(pod, name);
      expect(c.image).toBe(shimContainer.image);
      expect(c.securityContext).toEqual(shimContainer.securityContext);
    }
    expect(containerOf(pod, 'shim-check').args).toEqual(['dfe-keda-shim', 'check']);
    expect(containerOf(pod, 'doctor').args).toEqual(['dfe-hunt-runner', 'doctor']);
  });

  it("asks the shim's Service, on its port, with the configured pressure key", () => {
    const check = containerOf(testPod({ ...CH, helmTest: { pressureService: 'dfe-loader' }, kedaShim: { port: 8081 } }), 'shim-check');
    expect(envOf(check)).toEqual({ DFE_CHECK_URL: 'http://rel-dfe-keda-shim-shim.dfe.svc:8081', DFE_CHECK_SERVICE: 'dfe-loader' });
  });

  it('presents what KEDA presents: the auth Secret, or with mTLS the KEDA client certificate', () => {
    const basic = containerOf(testPod({ ...CH, kedaShim: { auth: { enabled: true, mode: 'basic', existingSecret: 'shim-auth' } } }), 'shim-check');
    expect(envOf(basic)).toMatchObject({ DFE_CHECK_AUTH_MODE: 'basic', DFE_CHECK_USERNAME_FILE: '/etc/dfe-keda-shim/auth/username' });
    const apiKey = containerOf(
      testPod({ ...CH, kedaShim: { auth: { enabled: true, mode: 'apiKey', existingSecret: 'shim-auth', apiKey: { method: 'query', header: 'X-Key', param: 'shim_key' } } } }),
      'shim-check',
    );
    expect(envOf(apiKey)).toMatchObject({ DFE_CHECK_AUTH_MODE: 'apiKey', DFE_CHECK_API_KEY_METHOD: 'query', DFE_CHECK_API_KEY_NAME: 'shim_key' });
    const mtlsPod = testPod({ ...CH, kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls', clientAuth: { enabled: true, caSecret: 'keda-ca', kedaSecret: 'keda-client' } } } });
    expect(envOf(containerOf(mtlsPod, 'shim-check'))).toMatchObject({
      DFE_CHECK_URL: 'https://rel-dfe-keda-shim-shim.dfe.svc:8080',
      DFE_CHECK_CA_FILE: '/etc/dfe-keda-shim/keda-client/ca.crt',
      DFE_CHECK_CLIENT_CERT_FILE: '/etc/dfe-keda-shim/keda-client/tls.crt',
    });
    expect(mtlsPod.spec.volumes).toContainEqual({ name: 'keda-client', secret: { secretName: 'keda-client' } });
  });

  it('the doctor gets the runner’s ClickHouse settings and hunts; helmTest off or no shim renders no Pod', () => {
    const doctor = containerOf(testPod({ ...CH, huntRunner: { clickhouse: { username: 'dfe_hunt_runner' } } }), 'doctor');
    expect(envOf(doctor)).toMatchObject({ DFE_CLICKHOUSE_USERNAME: 'dfe_hunt_runner', DFE_HUNTS_DIR: '/etc/dfe/hunts' });
    expect(testPod({ ...CH, helmTest: { doctor: false } }).spec.containers.map((c: Container) => c.name)).toEqual(['shim-check']);
    expect(testPods({ ...CH, helmTest: { enabled: false } })).toEqual([]);
    expect(testPods({ ...CH, kedaShim: { enabled: false } })).toEqual([]);
  });

  needs(skipValidation).it('validates (kubeconform -strict) with auth, with TLS and with mTLS', () => {
    const schemas = prepareSchemas();
    for (const values of [
      CH,
      { ...CH, kedaShim: { auth: { enabled: true, mode: 'bearer', existingSecret: 'shim-auth' } } },
      { ...CH, kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls' } }, clickhouse: { ...CH.clickhouse, caCert: { existingSecret: 'ch-ca' } } },
      { ...CH, kedaShim: { tls: { enabled: true, existingSecret: 'shim-tls', clientAuth: { enabled: true, caSecret: 'keda-ca', kedaSecret: 'keda-client' } } } },
    ]) {
      const result = kubeconform(schemas, helmTemplate(values).yaml);
      expect(result.resources.filter((r) => r.status !== 'statusValid'), result.raw).toEqual([]);
      expect(result.resources.some((r) => r.kind === 'Pod')).toBe(true);
    }
  });
});

describe('dfe-keda-shim check against a real shim', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'dfe-helm-test-'));
  const tokenFile = join(scratch, 'token');
  let shim: ChildProcess | undefined;
  let url = '';

  const childEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) env[key] = value;
    return { ...env, LOG_LEVEL: 'warn', ...extra };
  };
  const check = (env: Record<string, string>) =>
    spawnSync(process.execPath, [join(REPO, 'dist', 'src', 'cli', 'shim.js'), 'check'], { env: childEnv(env), encoding: 'utf8', timeout: 60_000 });

  beforeAll(async () => {
    writeFileSync(tokenFile, 'helm-test-token\n');
    const db = join(scratch, 'ch');
    // The coordination tables, so the backlog is a fresh answer from the engine.
    const schema = spawnSync(process.execPath, [join(REPO, 'dist', 'src', 'cli', 'hunt-runner.js'), 'schema', '--apply', '--embedded-path', db], { env: childEnv({}), encoding: 'utf8' });
    expect(schema.status, schema.stderr).toBe(0);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    shim = spawn(process.execPath, [join(REPO, 'dist', 'src', 'cli', 'shim.js'), '--port', String(port), '--host', '127.0.0.1', '--embedded-path', db], {
      env: childEnv({ DFE_KEDA_SHIM_AUTH_MODE: 'bearer', DFE_KEDA_SHIM_AUTH_TOKEN_FILE: tokenFile }),
      stdio: 'ignore',
    });
    // Bounded wait for the listener (not a timing assertion).
    for (let i = 0; i < 300; i++) {
      if (await fetch(`${url}/readyz`).then((r) => r.ok, () => false)) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error('the shim never answered /readyz');
  }, 120_000);

  afterAll(async () => {
    if (shim && shim.exitCode === null) {
      const exited = new Promise((resolve) => shim!.once('exit', resolve));
      shim.kill('SIGTERM');
      await exited;
    }
    rmSync(scratch, { recursive: true, force: true });
  });

  it("passes with KEDA's credentials: readyz, the backlog and a pressure key answer 200 with a number", () => {
    const result = check({ DFE_CHECK_URL: url, DFE_CHECK_SERVICE: 'helm-test', DFE_CHECK_AUTH_MODE: 'bearer', DFE_CHECK_TOKEN_FILE: tokenFile });
    expect(result.stdout).toMatch(/^PASS readyz .*: ok$/m);
    expect(result.stdout).toMatch(/^PASS hunt-backlog .*: ok \{"value":0/m);
    expect(result.stdout).toMatch(/^PASS pressure helm-test \(.*\/keda\/pressure\): ok \{"value":/m);
    expect(result.stdout).toContain('the shim answers as KEDA needs');
    expect(result.stdout + result.stderr).not.toContain('helm-test-token');
    expect(result.status).toBe(0);
  });

  it('fails, naming the check and the status, without the credentials', () => {
    const result = check({ DFE_CHECK_URL: url });
    expect(result.stdout).toMatch(/^FAIL hunt-backlog .*: HTTP 401/m);
    expect(result.stdout).toContain('2 of 3 checks failed');
    expect(result.status).toBe(1);
  });

  it('fails when nothing listens, and names a missing setting with exit 2', async () => {
    const refused = check({ DFE_CHECK_URL: `http://127.0.0.1:${await freePort()}` });
    expect(refused.stdout).toMatch(/^FAIL readyz .*: unreachable: .*ECONNREFUSED/m);
    expect(refused.status).toBe(1);
    const unset = check({});
    expect(unset.stderr).toContain('dfe-keda-shim check: the shim URL is required: --url or DFE_CHECK_URL');
    expect(unset.status).toBe(2);
  });
});
