import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ShimConfig } from '../config/load.js';
import { DfeError } from '../errors.js';

/**
 * Optional auth of the query routes (docs/api.md#auth-and-tls), matching what KEDA's
 * TriggerAuthentication sends to a metrics-api trigger. Secrets are read from
 * their files at every check, so a rotated mounted Secret (kubelet swaps the
 * `..data` symlink) works without a restart; reading a few bytes per KEDA poll
 * costs nothing. Comparisons are constant-time over SHA-256 digests, so
 * neither content nor length leaks through timing.
 */
export type AuthMode = ShimConfig['auth']['mode'];

export interface AuthRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly query: Readonly<Record<string, unknown>>;
}

export type AuthVerdict = { readonly kind: 'allowed' } | { readonly kind: 'denied'; readonly reason: string };

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

export function constantTimeEqual(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

async function readSecret(path: string | undefined, key: string): Promise<string> {
  if (path === undefined) throw new DfeError('CONFIG_INVALID', `${key} is required by DFE_KEDA_SHIM_AUTH_MODE`, { key });
  // Secrets written by hand often end with a newline; KEDA sends none.
  return (await readFile(path, 'utf8')).trim();
}

function header(request: AuthRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** Checks that a mode's secret files are configured (at startup; contents are read per request). */
export function assertAuthConfig(auth: ShimConfig['auth']): void {
  const need: Record<AuthMode, [string, string | undefined][]> = {
    none: [],
    bearer: [['DFE_KEDA_SHIM_AUTH_TOKEN_FILE', auth.tokenFile]],
    apiKey: [['DFE_KEDA_SHIM_AUTH_TOKEN_FILE', auth.tokenFile]],
    basic: [
      ['DFE_KEDA_SHIM_AUTH_USERNAME_FILE', auth.usernameFile],
      ['DFE_KEDA_SHIM_AUTH_PASSWORD_FILE', auth.passwordFile],
    ],
  };
  for (const [key, value] of need[auth.mode]) {
    if (value === undefined) {
      throw new DfeError('CONFIG_INVALID', `DFE_KEDA_SHIM_AUTH_MODE=${auth.mode} needs ${key}`, { key, value: auth.mode });
    }
  }
}

export async function checkAuth(auth: ShimConfig['auth'], request: AuthRequest): Promise<AuthVerdict> {
  switch (auth.mode) {
    case 'none':
      return { kind: 'allowed' };
    case 'bearer': {
      const match = /^Bearer\s+(.+)$/i.exec(header(request, 'authorization') ?? '');
      if (!match?.[1]) return { kind: 'denied', reason: 'missing bearer token' };
      const ok = constantTimeEqual(match[1].trim(), await readSecret(auth.tokenFile, 'DFE_KEDA_SHIM_AUTH_TOKEN_FILE'));
      return ok ? { kind: 'allowed' } : { kind: 'denied', reason: 'wrong bearer token' };
    }
    case 'apiKey': {
      const fromQuery = request.query.api_key;
      const given = header(request, 'x-api-key') ?? (typeof fromQuery === 'string' ? fromQuery : undefined);
      if (!given) return { kind: 'denied', reason: 'missing API key' };
      const ok = constantTimeEqual(given, await readSecret(auth.tokenFile, 'DFE_KEDA_SHIM_AUTH_TOKEN_FILE'));
      return ok ? { kind: 'allowed' } : { kind: 'denied', reason: 'wrong API key' };
    }
    case 'basic': {
      const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header(request, 'authorization') ?? '');
      if (!match?.[1]) return { kind: 'denied', reason: 'missing basic credentials' };
      const decoded = Buffer.from(match[1], 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return { kind: 'denied', reason: 'malformed basic credentials' };
      const [username, password] = await Promise.all([
        readSecret(auth.usernameFile, 'DFE_KEDA_SHIM_AUTH_USERNAME_FILE'),
        readSecret(auth.passwordFile, 'DFE_KEDA_SHIM_AUTH_PASSWORD_FILE'),
      ]);
      // Both compared, always: no early exit that would tell which one was wrong.
      const userOk = constantTimeEqual(decoded.slice(0, colon), username);
      const passOk = constantTimeEqual(decoded.slice(colon + 1), password);
      return userOk && passOk ? { kind: 'allowed' } : { kind: 'denied', reason: 'wrong basic credentials' };
    }
  }
}

/** The WWW-Authenticate challenge of a mode, if it has one. */
export function challengeOf(mode: AuthMode): string | undefined {
  if (mode === 'bearer') return 'Bearer realm="dfe-keda-shim"';
  if (mode === 'basic') return 'Basic realm="dfe-keda-shim"';
  return undefined;
}
