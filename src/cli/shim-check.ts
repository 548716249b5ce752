import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { parseArgs } from 'node:util';
import { DfeError, describeError } from '../errors.js';

/**
 * `dfe-keda-shim check`: what `helm test` runs against the release's shim Service
 * (docs/operations.md#helm-test): asks it what KEDA asks — /readyz, /keda/hunt-backlog and one
 * pressure key — with the credentials KEDA would present, prints one line per check, and exits
 * 1 when one fails. Every setting comes from a flag or its DFE_CHECK_* twin (the chart sets
 * the env); credentials are read from files and never printed.
 */
export const CHECK_USAGE = `Usage: dfe-keda-shim check [--url <base>] [--service <name>] [--hold <n>]

Asks a running shim what KEDA asks: /readyz, /keda/hunt-backlog, /keda/pressure?service=…&hold=….
Exits 0 when every answer is a 200 (the two KEDA routes with a finite number), 1 otherwise.

  --url <base>       the shim's base URL            (DFE_CHECK_URL, required)
  --service <name>   the pressure key to ask for    (DFE_CHECK_SERVICE, default helm-test)
  --hold <n>         the hold of that request       (DFE_CHECK_HOLD, default 70)

Credentials, as KEDA presents them (each a file path):
  DFE_CHECK_AUTH_MODE bearer|basic|apiKey, DFE_CHECK_TOKEN_FILE, DFE_CHECK_USERNAME_FILE,
  DFE_CHECK_PASSWORD_FILE, DFE_CHECK_API_KEY_METHOD header|query, DFE_CHECK_API_KEY_NAME;
  TLS: DFE_CHECK_CA_FILE (trust), DFE_CHECK_CLIENT_CERT_FILE + DFE_CHECK_CLIENT_KEY_FILE (mTLS).`;

export interface CheckSettings {
  readonly url: URL;
  readonly service: string;
  readonly hold: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  readonly tls: { readonly ca?: Buffer; readonly cert?: Buffer; readonly key?: Buffer };
}

const readBytes = (path: string, key: string): Buffer => {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new DfeError('CONFIG_INVALID', `invalid ${key}=${path}: ${describeError(err)}`, { key, value: path, cause: err });
  }
};
const read = (path: string, key: string): string => readBytes(path, key).toString('utf8').trim();

function credentials(env: NodeJS.ProcessEnv): { headers: Record<string, string>; query: Record<string, string> } {
  const mode = env['DFE_CHECK_AUTH_MODE'] ?? '';
  const file = (key: string) => {
    const path = env[key];
    if (!path) throw new DfeError('CONFIG_INVALID', `${key} is required with DFE_CHECK_AUTH_MODE=${mode}`, { key });
    return read(path, key);
  };
  if (mode === '') return { headers: {}, query: {} };
  if (mode === 'bearer') return { headers: { authorization: `Bearer ${file('DFE_CHECK_TOKEN_FILE')}` }, query: {} };
  if (mode === 'basic') {
    const pair = `${file('DFE_CHECK_USERNAME_FILE')}:${file('DFE_CHECK_PASSWORD_FILE')}`;
    return { headers: { authorization: `Basic ${Buffer.from(pair).toString('base64')}` }, query: {} };
  }
  if (mode === 'apiKey') {
    const name = env['DFE_CHECK_API_KEY_NAME'] || 'X-API-Key';
    const key = file('DFE_CHECK_TOKEN_FILE');
    return env['DFE_CHECK_API_KEY_METHOD'] === 'query' ? { headers: {}, query: { [name]: key } } : { headers: { [name.toLowerCase()]: key }, query: {} };
  }
  throw new DfeError('CONFIG_INVALID', `invalid DFE_CHECK_AUTH_MODE=${mode}: bearer, basic or apiKey`, { key: 'DFE_CHECK_AUTH_MODE', value: mode });
}

export function checkSettings(argv: readonly string[], env: NodeJS.ProcessEnv): CheckSettings {
  const { values } = parseArgs({ args: [...argv], strict: true, options: { url: { type: 'string' }, service: { type: 'string' }, hold: { type: 'string' } } });
  const base = values.url ?? env['DFE_CHECK_URL'];
  if (!base) throw new DfeError('USAGE', 'the shim URL is required: --url or DFE_CHECK_URL');
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new DfeError('USAGE', `invalid --url / DFE_CHECK_URL=${base}: not a URL`, { value: base });
  }
  const fileOf = (key: string) => (env[key] ? readBytes(env[key], key) : undefined);
  const tls = { ca: fileOf('DFE_CHECK_CA_FILE'), cert: fileOf('DFE_CHECK_CLIENT_CERT_FILE'), key: fileOf('DFE_CHECK_CLIENT_KEY_FILE') };
  return {
    url,
    service: values.service ?? env['DFE_CHECK_SERVICE'] ?? 'helm-test',
    hold: values.hold ?? env['DFE_CHECK_HOLD'] ?? '70',
    ...credentials(env),
    tls: Object.fromEntries(Object.entries(tls).filter(([, v]) => v !== undefined)),
  };
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

function get(settings: CheckSettings, path: string, params: Record<string, string>): Promise<Answer> {
  const target = new URL(path, settings.url);
  for (const [k, v] of Object.entries({ ...params, ...settings.query })) target.searchParams.set(k, v);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(target, { headers: settings.headers, timeout: 10_000, ...settings.tls }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', reject);
    req.end();
  });
}

/** What makes one answer good: a 200, and for a KEDA route a finite number in `value`. */
export function judge(answer: Answer, needsValue: boolean): string | undefined {
  if (answer.status !== 200) return `HTTP ${answer.status}: ${answer.body.slice(0, 200)}`;
  if (!needsValue) return undefined;
  let value: unknown;
  try {
    value = (JSON.parse(answer.body) as { value?: unknown }).value;
  } catch {
    return `not JSON: ${answer.body.slice(0, 200)}`;
  }
  return typeof value === 'number' && Number.isFinite(value) ? undefined : `no finite number in "value": ${answer.body.slice(0, 200)}`;
}

/** Runs the three checks, one line each to `out`; resolves with the exit code. */
export async function runCheck(settings: CheckSettings, out: (line: string) => void): Promise<number> {
  const checks: Array<{ name: string; path: string; params: Record<string, string>; needsValue: boolean }> = [
    { name: 'readyz', path: '/readyz', params: {}, needsValue: false },
    { name: 'hunt-backlog', path: '/keda/hunt-backlog', params: {}, needsValue: true },
    { name: `pressure ${settings.service}`, path: '/keda/pressure', params: { service: settings.service, hold: settings.hold }, needsValue: true },
  ];
  let failed = 0;
  for (const check of checks) {
    const problem = await get(settings, check.path, check.params).then(
      (answer) => judge(answer, check.needsValue) ?? (check.needsValue ? `ok ${answer.body.trim()}` : 'ok'),
      (err: unknown) => `unreachable: ${describeError(err)}`,
    );
    const ok = problem.startsWith('ok');
    if (!ok) failed++;
    out(`${ok ? 'PASS' : 'FAIL'} ${check.name} (${settings.url.origin}${check.path}): ${problem}`);
  }
  out(failed === 0 ? 'the shim answers as KEDA needs' : `${failed} of ${checks.length} checks failed`);
  return failed === 0 ? 0 : 1;
}
