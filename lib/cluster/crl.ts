// The serial numbers a PEM file of certificate revocation lists revokes (the CertificateList of RFC 5280), read so the
// control plane can refuse a revoked certificate on a connection made before the list was loaded
// (docs/decisions/0242). Only a deny list: TLS itself checks each new handshake against the lists.
import { PidfenceError } from '../base/errors';

interface Element {
  readonly tag: number;
  /** Where the contents start and end in the buffer. */
  readonly start: number;
  readonly end: number;
}

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;
const PEM_BLOCK = /-----BEGIN X509 CRL-----([\s\S]*?)-----END X509 CRL-----/g;

function invalid(why: string): PidfenceError {
  return new PidfenceError(
    `the CRL file is not a PEM certificate revocation list (${why}); give the file \`openssl ca -gencrl\` writes.`,
    'ERR_PIDFENCE_CLUSTER_CRL_INVALID',
  );
}

/** One DER element (definite lengths only, as DER requires) at `offset`, inside `limit`. */
function elementAt(der: Buffer, offset: number, limit: number): Element {
  if (offset + 2 > limit) throw invalid('truncated');
  const tag = der[offset] as number;
  let length = der[offset + 1] as number;
  let start = offset + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || start + bytes > limit) throw invalid('bad length');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + (der[start + i] as number);
    start += bytes;
  }
  if (start + length > limit) throw invalid('truncated');
  return { tag, start, end: start + length };
}

function childrenOf(der: Buffer, parent: Element): Element[] {
  const children: Element[] = [];
  for (let offset = parent.start; offset < parent.end;) {
    const child = elementAt(der, offset, parent.end);
    children.push(child);
    offset = child.end;
  }
  return children;
}

/** A serial as node:crypto's X509Certificate.serialNumber spells it, without leading zeros: upper-case hex. */
export function normalSerial(hex: string): string {
  return hex.toUpperCase().replace(/^0+(?=.)/, '');
}

/** tbsCertList: version?, signature, issuer, thisUpdate, nextUpdate?, revokedCertificates?, extensions? */
function revokedOf(der: Buffer): string[] {
  const list = elementAt(der, 0, der.length);
  if (list.tag !== SEQUENCE) throw invalid('no CertificateList');
  const [tbs] = childrenOf(der, list);
  if (tbs?.tag !== SEQUENCE) throw invalid('no tbsCertList');
  const fields = childrenOf(der, tbs);
  let index = fields[0]?.tag === INTEGER ? 4 : 3; // past version?, signature, issuer, thisUpdate
  if (fields[index - 1] === undefined) throw invalid('no thisUpdate');
  if (fields[index]?.tag === UTC_TIME || fields[index]?.tag === GENERALIZED_TIME) index++;
  const revoked = fields[index];
  if (revoked?.tag !== SEQUENCE) return [];
  return childrenOf(der, revoked).map((entry) => {
    const [serial] = childrenOf(der, entry);
    if (serial?.tag !== INTEGER) throw invalid('a revoked entry without a serial');
    return normalSerial(der.subarray(serial.start, serial.end).toString('hex'));
  });
}

/** Every serial revoked by the CRLs in `pem` (one or more PEM blocks); a file without a CRL is refused. */
export function revokedSerials(pem: string | Buffer): ReadonlySet<string> {
  const text = typeof pem === 'string' ? pem : pem.toString('utf8');
  const serials = new Set<string>();
  let blocks = 0;
  for (const match of text.matchAll(PEM_BLOCK)) {
    blocks++;
    for (const serial of revokedOf(Buffer.from((match[1] ?? '').replace(/\s+/g, ''), 'base64'))) serials.add(serial);
  }
  if (blocks === 0) throw invalid('no X509 CRL block');
  return serials;
}
