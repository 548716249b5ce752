import { readFile } from 'node:fs/promises';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { ShimConfig } from '../../config/load.js';
import { secretText } from '../auth.js';
import type { PeerTarget } from './peer-targets.js';

/**
 * One GET of a peer's `/internal/last-good` (docs/api.md#internal-last-good), with
 * the credentials the shim's own auth mode expects (read from the same
 * secret files at each call) and, under TLS, the shim's own certificate as
 * the client certificate. Bounded: few sockets per peer, a hard timeout.
 */
export const PEER_ROUTE = '/internal/last-good';

export interface PeerEntry {
  readonly value: number;
  readonly ageSeconds: number;
}

export type PeerReply = { readonly kind: 'found'; readonly entry: PeerEntry } | { readonly kind: 'not_found' } | { readonly kind: 'error'; readonly message: string };

/** Largest peer answer read: the route answers one small JSON object. */
const MAX_BODY_BYTES = 4096;

export class PeerClient {
  private readonly http = new HttpAgent({ keepAlive: true, maxSockets: 4, maxFreeSockets: 2 });
  private readonly https: HttpsAgent | undefined;

  constructor(private readonly shim: Pick<ShimConfig, 'auth' | 'tls'>) {
    this.https = new HttpsAgent({ keepAlive: true, maxSockets: 4, maxFreeSockets: 2 });
  }

  async ask(target: PeerTarget, search: URLSearchParams, timeoutMs: number): Promise<PeerReply> {
    const url = new URL(`${target.base}${PEER_ROUTE}?${search.toString()}`);
    const headers: Record<string, string> = { host: `${target.host}:${url.port}`, ...(await this.authHeaders()) };
    const secure = url.protocol === 'https:';
    const tls = secure ? await this.tlsOptions(target.host) : {};
    return new Promise<PeerReply>((done) => {
      const send = secure ? httpsRequest : httpRequest;
      const req = send(url, { method: 'GET', headers, agent: secure ? this.https : this.http, timeout: timeoutMs, ...tls }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
          if (body.length > MAX_BODY_BYTES) req.destroy(new Error('answer too large'));
        });
        res.on('end', () => done(parseReply(res.statusCode ?? 0, body)));
        res.on('error', (err) => done({ kind: 'error', message: err.message }));
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on('close', () => clearTimeout(timer));
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', (err) => done({ kind: 'error', message: err.message }));
      req.end();
    });
  }

  close(): void {
    this.http.destroy();
    this.https?.destroy();
  }

  private async authHeaders(): Promise<Record<string, string>> {
    const auth = this.shim.auth;
    const read = async (path: string | undefined) => (path === undefined ? '' : secretText(await readFile(path, 'utf8')));
    switch (auth.mode) {
      case 'none':
        return {};
      case 'bearer':
        return { authorization: `Bearer ${await read(auth.tokenFile)}` };
      case 'apiKey':
        return { [auth.apiKeyHeader.toLowerCase()]: await read(auth.tokenFile) };
      case 'basic': {
        const pair = `${await read(auth.usernameFile)}:${await read(auth.passwordFile)}`;
        return { authorization: `Basic ${Buffer.from(pair, 'utf8').toString('base64')}` };
      }
    }
  }

  /**
   * Under TLS: our own certificate as the client certificate (mutual TLS asks for one).
   * Trusted for the peer's certificate: the client CA file when set, else what Node trusts
   * by default (its public CAs and NODE_EXTRA_CA_CERTS, which an explicit `ca` list would
   * otherwise drop); and in both cases our own certificate file, so replicas sharing one
   * self-signed certificate (or one whose file carries its CA) trust each other.
   */
  private async tlsOptions(host: string): Promise<Record<string, unknown>> {
    const tls = this.shim.tls;
    if (tls === undefined) return { servername: host };
    const [cert, key] = await Promise.all([readFile(tls.certFile), readFile(tls.keyFile)]);
    const trusted = tls.clientCaFile === undefined ? await nodeDefaultCas() : [await readFile(tls.clientCaFile)];
    return { servername: host, cert, key, ca: [...trusted, cert] };
  }
}

/**
 * Node's default trust: its public CAs, plus the file NODE_EXTRA_CA_CERTS names (unreadable:
 * left out, as Node does). Each file is read once.
 */
const defaultCas = new Map<string, Promise<ReadonlyArray<string | Buffer>>>();
function nodeDefaultCas(): Promise<ReadonlyArray<string | Buffer>> {
  const extra = process.env.NODE_EXTRA_CA_CERTS ?? '';
  if (extra === '') return Promise.resolve(rootCertificates);
  let cas = defaultCas.get(extra);
  if (cas === undefined) {
    cas = readFile(extra).then((pem) => [...rootCertificates, pem], () => rootCertificates);
    defaultCas.set(extra, cas);
  }
  return cas;
}

function parseReply(status: number, body: string): PeerReply {
  if (status === 404) return { kind: 'not_found' };
  if (status !== 200) return { kind: 'error', message: `HTTP ${status}` };
  try {
    const json = JSON.parse(body) as { value?: unknown; age_seconds?: unknown };
    const { value, age_seconds: age } = json;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return { kind: 'error', message: 'answer without a valid value' };
    if (typeof age !== 'number' || !Number.isFinite(age) || age < 0) return { kind: 'error', message: 'answer without a valid age_seconds' };
    return { kind: 'found', entry: { value, ageSeconds: age } };
  } catch {
    return { kind: 'error', message: 'answer is not JSON' };
  }
}
