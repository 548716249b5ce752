import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ShimConfig } from '../config/load.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * Optional auth of the query routes (docs/security.md#auth-modes-of-the-query-routes,
 * docs/api.md#auth-and-tls), matching what KEDA's
 * TriggerAuthentication sends to a metrics-api trigger. Secrets are read from
 * their files at every check, so a rotated mounted Secret (kubelet swaps the
 * `..data` symlink) works without a restart; reading a few bytes per KEDA poll
 * costs nothing.
 *
 * Fail closed:
 * - an unreadable or EMPTY secret file denies every request (an empty secret
 *   must never match an empty or whitespace credential), and says so in the
 *   log once per change of state, naming the file, never the content;
 * - the only trimming is of line endings (`\r?\n`) at the END of a secret file,
 *   which `echo` and editors add; nothing else, on either side — JS `trim()`
 *   would strip U+00A0 and other Unicode spaces into a match;
 * - basic auth with an empty username and password never matches;
 * - comparisons are constant-time over SHA-256 digests (equal length), so
 *   neither content nor length leaks through timing.
 */
export type AuthMode = ShimConfig['auth']['mode'];
export type AuthSettings = ShimConfig['auth'];

export interface AuthRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly query: Readonly<Record<string, unknown>>;
}

export type AuthVerdict = { readonly kind: 'allowed' } | { readonly kind: 'denied'; readonly reason: string };

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function constantTimeEqual(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** A mounted secret's content as compared: only trailing line endings are dropped. */
export function secretText(content: string): string {
  return content.replace(/(?:\r?\n)+$/, '');
}

function header(request: AuthRequest, name: string): string | undefined {
  const value = request.headers[name.toLowerCase()];
  return typeof value === 'string' ? value : undefined;
}

/** The secret files of a mode (the config loader checks they are set). */
function secretFilesOf(auth: AuthSettings): [string, string | undefined][] {
  switch (auth.mode) {
    case 'none':
      return [];
    case 'bearer':
    case 'apiKey':
      return [['DFE_KEDA_SHIM_AUTH_TOKEN_FILE', auth.tokenFile]];
    case 'basic':
      return [
        ['DFE_KEDA_SHIM_AUTH_USERNAME_FILE', auth.usernameFile],
        ['DFE_KEDA_SHIM_AUTH_PASSWORD_FILE', auth.passwordFile],
      ];
  }
}

type SecretState = 'ok' | 'empty' | `unreadable: ${string}`;

/**
 * The auth check of one app: the settings, and what it last saw of each
 * secret file, so that a bad secret is logged once (at startup, and again
 * only when its state changes), not once per poll.
 */
export class AuthGuard {
  private readonly states = new Map<string, SecretState>();

  constructor(
    readonly settings: AuthSettings,
    private readonly logger: Logger,
  ) {}

  /** Reads every secret once so a bad one is logged at startup. */
  async prime(): Promise<void> {
    for (const [key, path] of secretFilesOf(this.settings)) await this.secret(path, key);
  }

  /** The secret, or undefined (deny) when the file is unreadable or empty. */
  private async secret(path: string | undefined, key: string): Promise<string | undefined> {
    if (path === undefined) return undefined;
    let state: SecretState;
    let text: string | undefined;
    try {
      text = secretText(await readFile(path, 'utf8'));
      state = text === '' ? 'empty' : 'ok';
    } catch (err) {
      state = `unreadable: ${describeError(err)}`;
    }
    if (this.states.get(path) !== state) {
      const first = !this.states.has(path);
      this.states.set(path, state);
      if (state === 'empty') this.logger.error({ file: path, key }, 'auth secret file is empty: every query request is denied (401)');
      else if (state !== 'ok') this.logger.error({ file: path, key, reason: state.slice('unreadable: '.length) }, 'auth secret file unreadable: every query request is denied (401)');
      else if (!first) this.logger.info({ file: path, key }, 'auth secret file readable again');
    }
    return state === 'ok' ? text : undefined;
  }

  async check(request: AuthRequest): Promise<AuthVerdict> {
    const auth = this.settings;
    switch (auth.mode) {
      case 'none':
        return { kind: 'allowed' };
      case 'bearer': {
        const match = /^Bearer +(.+)$/i.exec(header(request, 'authorization') ?? '');
        const expected = await this.secret(auth.tokenFile, 'DFE_KEDA_SHIM_AUTH_TOKEN_FILE');
        if (expected === undefined) return { kind: 'denied', reason: 'secret unusable' };
        if (!match?.[1]) return { kind: 'denied', reason: 'missing bearer token' };
        return constantTimeEqual(match[1], expected) ? { kind: 'allowed' } : { kind: 'denied', reason: 'wrong bearer token' };
      }
      case 'apiKey': {
        const fromQuery = request.query[auth.apiKeyParam];
        const given = header(request, auth.apiKeyHeader) ?? (typeof fromQuery === 'string' ? fromQuery : undefined);
        const expected = await this.secret(auth.tokenFile, 'DFE_KEDA_SHIM_AUTH_TOKEN_FILE');
        if (expected === undefined) return { kind: 'denied', reason: 'secret unusable' };
        if (!given) return { kind: 'denied', reason: 'missing API key' };
        return constantTimeEqual(given, expected) ? { kind: 'allowed' } : { kind: 'denied', reason: 'wrong API key' };
      }
      case 'basic': {
        const [username, password] = [
          await this.secret(auth.usernameFile, 'DFE_KEDA_SHIM_AUTH_USERNAME_FILE'),
          await this.secret(auth.passwordFile, 'DFE_KEDA_SHIM_AUTH_PASSWORD_FILE'),
        ];
        if (username === undefined || password === undefined) return { kind: 'denied', reason: 'secret unusable' };
        const match = /^Basic +([A-Za-z0-9+/]+={0,2})$/i.exec(header(request, 'authorization') ?? '');
        if (!match?.[1]) return { kind: 'denied', reason: 'missing basic credentials' };
        const decoded = Buffer.from(match[1], 'base64').toString('utf8');
        const colon = decoded.indexOf(':');
        if (colon < 0) return { kind: 'denied', reason: 'malformed basic credentials' };
        const givenUser = decoded.slice(0, colon);
        const givenPass = decoded.slice(colon + 1);
        // Both compared, always: no early exit that would tell which one was wrong.
        const userOk = constantTimeEqual(givenUser, username);
        const passOk = constantTimeEqual(givenPass, password);
        if (givenUser === '' && givenPass === '') return { kind: 'denied', reason: 'empty basic credentials' };
        return userOk && passOk ? { kind: 'allowed' } : { kind: 'denied', reason: 'wrong basic credentials' };
      }
    }
  }
}

/** The WWW-Authenticate challenge of a mode, if it has one. */
export function challengeOf(mode: AuthMode): string | undefined {
  if (mode === 'bearer') return 'Bearer realm="dfe-keda-shim"';
  if (mode === 'basic') return 'Basic realm="dfe-keda-shim"';
  return undefined;
}
