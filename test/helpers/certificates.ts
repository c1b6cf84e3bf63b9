// Certificates made with `openssl` for each test run: a cluster CA, a server certificate for
// 127.0.0.1, client certificates for workers and operators, and a client from a foreign CA.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface Pem {
  readonly cert: string;
  readonly key: string;
  readonly certPath: string;
  readonly keyPath: string;
}

export interface Certificates {
  readonly dir: string;
  readonly ca: Pem;
  readonly foreignCa: Pem;
  server: Pem;
  /** A client certificate with subject CN `cn`, signed by the cluster CA (or `signer`). */
  client(cn: string, signer?: Pem): Pem;
  remove(): void;
}

function openssl(dir: string, args: readonly string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function pemAt(dir: string, name: string): Pem {
  const certPath = path.join(dir, `${name}.crt`);
  const keyPath = path.join(dir, `${name}.key`);
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath, keyPath };
}

function authority(dir: string, name: string): Pem {
  openssl(dir, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.crt`]);
  return pemAt(dir, name);
}

function signed(dir: string, name: string, cn: string, signer: Pem, extensions: string): Pem {
  writeFileSync(path.join(dir, `${name}.ext`), extensions);
  openssl(dir, ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
  openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', signer.certPath, '-CAkey', signer.keyPath, '-CAcreateserial',
    '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.crt`]);
  return pemAt(dir, name);
}

export function makeCertificates(): Certificates {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-certs-'));
  const ca = authority(dir, 'cluster-ca');
  const foreignCa = authority(dir, 'foreign-ca');
  const server = signed(dir, 'server', 'control-plane', ca, 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  let serial = 0;
  return {
    dir, ca, foreignCa, server,
    client: (cn, signer = ca) => signed(dir, `client-${++serial}`, cn, signer, 'extendedKeyUsage=clientAuth\n'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
