// The CRL reader of the control plane's per-request check (docs/decisions/0242): the serials of
// real `openssl ca` revocation lists, spelt as node:crypto spells a peer certificate's serial, and a
// typed refusal of anything that is not a CRL.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';

import test from 'ava';

import { normalSerial, revokedSerials } from '../../lib/cluster/crl';
import { checkTrustMaterial } from '../../lib/cluster/tls-trust';
import { makeCertificates } from '../helpers/certificates';

const serialOf = (certPath: string): string => normalSerial(new X509Certificate(readFileSync(certPath)).serialNumber);

test("a fresh CRL revokes nothing; each revocation adds exactly that certificate's serial, as X509Certificate spells it", (t) => {
  const certs = makeCertificates();
  t.teardown(() => certs.remove());
  t.deepEqual([...revokedSerials(readFileSync(certs.crlPath, 'utf8'))], []);
  const [a, b, c] = ['w-a', 'w-b', 'w-c'].map((cn) => certs.client(cn));
  certs.revoke(a!);
  t.deepEqual([...revokedSerials(readFileSync(certs.crlPath))], [serialOf(a!.certPath)]);
  certs.revoke(c!);
  const revoked = revokedSerials(readFileSync(certs.crlPath, 'utf8'));
  t.true(revoked.has(serialOf(a!.certPath)) && revoked.has(serialOf(c!.certPath)));
  t.false(revoked.has(serialOf(b!.certPath)));
  t.is(revoked.size, 2);
  // Two lists in one file (a CA bundle's lists): the union.
  const fresh = makeCertificates();
  t.teardown(() => fresh.remove());
  fresh.revoke(fresh.client('w-d'));
  t.is(revokedSerials(`${readFileSync(certs.crlPath, 'utf8')}\n${readFileSync(fresh.crlPath, 'utf8')}`).size, 3);
});

test('serials compare without leading zeros and case', (t) => {
  t.is(normalSerial('00ab01'), 'AB01');
  t.is(normalSerial('0'), '0');
  t.is(normalSerial('6F30'), '6F30');
});

test('anything but a PEM CRL is a typed error, and trust material that does not fit together is refused before use', (t) => {
  const certs = makeCertificates();
  t.teardown(() => certs.remove());
  t.throws(() => revokedSerials('not a crl'), { code: 'ERR_PIDFENCE_CLUSTER_CRL_INVALID' });
  t.throws(() => revokedSerials('-----BEGIN X509 CRL-----\nMAMCAQA=\n-----END X509 CRL-----\n'), {
    code: 'ERR_PIDFENCE_CLUSTER_CRL_INVALID',
  });
  t.throws(
    () => revokedSerials(certs.ca.cert),
    { code: 'ERR_PIDFENCE_CLUSTER_CRL_INVALID' },
    'a certificate is not a CRL',
  );
  const crl = readFileSync(certs.crlPath, 'utf8');
  t.notThrows(() => checkTrustMaterial({ cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert, crl }));
  const other = certs.client('w-x');
  t.throws(
    () => checkTrustMaterial({ cert: certs.server.cert, key: other.key, ca: certs.ca.cert }),
    { code: 'ERR_PIDFENCE_CLUSTER_TLS_FILE' },
    "a key that is not the certificate's",
  );
  t.throws(
    () => checkTrustMaterial({ cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert, crl: 'garbage' }),
    { code: 'ERR_PIDFENCE_CLUSTER_CRL_INVALID' },
  );
});
