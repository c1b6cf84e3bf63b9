// Certificates made with `openssl` for each test run: a cluster CA, a server certificate for
// 127.0.0.1, client certificates for workers and operators, a client from a foreign CA, and the
// cluster CA's revocation list (`openssl ca -revoke`, `-gencrl`).
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
  /** A new server certificate for 127.0.0.1 (a renewal), written at `server`'s own paths. */
  renewServer(): Pem;
  /** Adds `pem` to the cluster CA's revoked certificates; writes the CRL again. */
  revoke(pem: Pem): void;
  /** The cluster CA's CRL file (PEM): every certificate revoked so far, none at first. */
  readonly crlPath: string;
  remove(): void;
}

function openssl(dir: string, args: readonly string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** The TLS flags of `pidfence control-plane` and `pidfence worker`: this certificate and key, trusting `ca`. */
export function tlsFlags(pem: Pem, ca: Pem): string[] {
  return ['--cert', pem.certPath, '--key', pem.keyPath, '--ca', ca.certPath];
}

function pemAt(dir: string, name: string): Pem {
  const certPath = path.join(dir, `${name}.crt`);
  const keyPath = path.join(dir, `${name}.key`);
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath, keyPath };
}

function authority(dir: string, name: string): Pem {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
  ]);
  return pemAt(dir, name);
}

function signed(dir: string, name: string, cn: string, signer: Pem, extensions: string): Pem {
  writeFileSync(path.join(dir, `${name}.ext`), extensions);
  openssl(dir, [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-subj',
    `/CN=${cn}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
  ]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    signer.certPath,
    '-CAkey',
    signer.keyPath,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.crt`,
  ]);
  return pemAt(dir, name);
}

/** `openssl ca` keeps its revocations in an index file; this config names it and the CRL's lifetime. */
function crlConfig(dir: string): string {
  writeFileSync(path.join(dir, 'index.txt'), '');
  writeFileSync(path.join(dir, 'crlnumber'), '01\n');
  const config = path.join(dir, 'ca.cnf');
  writeFileSync(
    config,
    '[ ca ]\ndefault_ca = cluster\n[ cluster ]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 2\n',
  );
  return config;
}

const SERVER_EXTENSIONS = 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n';

export function makeCertificates(): Certificates {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-certs-'));
  const ca = authority(dir, 'cluster-ca');
  const foreignCa = authority(dir, 'foreign-ca');
  const server = signed(dir, 'server', 'control-plane', ca, SERVER_EXTENSIONS);
  const config = crlConfig(dir);
  const crlPath = path.join(dir, 'cluster-ca.crl');
  const gencrl = (): void =>
    openssl(dir, ['ca', '-config', config, '-keyfile', ca.keyPath, '-cert', ca.certPath, '-gencrl', '-out', crlPath]);
  gencrl();
  let serial = 0;
  const certificates: Certificates = {
    dir,
    ca,
    foreignCa,
    server,
    crlPath,
    client: (cn, signer = ca) => signed(dir, `client-${++serial}`, cn, signer, 'extendedKeyUsage=clientAuth\n'),
    renewServer: () => {
      certificates.server = signed(dir, 'server', 'control-plane', ca, SERVER_EXTENSIONS);
      return certificates.server;
    },
    revoke: (pem) => {
      openssl(dir, ['ca', '-config', config, '-keyfile', ca.keyPath, '-cert', ca.certPath, '-revoke', pem.certPath]);
      gencrl();
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
  return certificates;
}
