import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { missing, tools } from './tools.js';

/**
 * Certificates made by the openssl CLI in a temp dir, for the TLS suites (HTTP,
 * mutual TLS, gRPC, peers): a self-signed server certificate for 127.0.0.1,
 * CAs with a client certificate each, and replica certificates a CA signed.
 * `missing` says why when openssl is absent (`needs(...)` turns that into a
 * skip, or a failure under CI=true); openssl present but failing throws, so a
 * broken toolchain is never a skip.
 */
export interface CertDir {
  /** Why there are no certificates (openssl missing), else undefined. */
  readonly missing: string | undefined;
  /** The path of a file made here: `server.crt`, `right-ca.crt`, `right-client.key`… */
  at(name: string): string;
  /** `server.crt` / `server.key`: self-signed, subjectAltName IP:127.0.0.1. */
  server(): void;
  /** `<prefix>-ca.{crt,key}` and `<prefix>-client.{crt,key}` it signed (clientAuth, as KEDA's would be). */
  caAndClient(prefix: string): void;
  /** `<name>.{crt,key}` signed by `<ca>-ca`: IP:127.0.0.1, serverAuth and clientAuth, as a replica presents to its peers. */
  replica(name: string, ca: string): void;
  remove(): void;
}

export function certDir(prefix: string): CertDir {
  const dir = mkdtempSync(join(tmpdir(), `dfe-${prefix}-`));
  const at = (name: string) => join(dir, name);
  const why = missing('openssl');
  const openssl = (args: string[]): void => {
    if (why !== undefined) return;
    const run = spawnSync(tools.openssl!, args, { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${run.error?.message ?? run.stderr}`);
  };
  const signed = (name: string, ca: string, subject: string, extensions: string) => {
    writeFileSync(at(`${name}-ext.cnf`), extensions);
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`)]);
    openssl(['x509', '-req', '-in', at(`${name}.csr`), '-CA', at(`${ca}-ca.crt`), '-CAkey', at(`${ca}-ca.key`), '-CAcreateserial', '-days', '1', '-extfile', at(`${name}-ext.cnf`), '-out', at(`${name}.crt`)]);
  };
  return {
    missing: why,
    at,
    server: () =>
      openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', at('server.key'), '-out', at('server.crt')]),
    caAndClient(ca) {
      openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${ca}-ca`, '-keyout', at(`${ca}-ca.key`), '-out', at(`${ca}-ca.crt`)]);
      signed(`${ca}-client`, ca, `/CN=${ca}-keda`, 'extendedKeyUsage=clientAuth\n');
    },
    replica: (name, ca) => signed(name, ca, `/CN=${name}`, 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
