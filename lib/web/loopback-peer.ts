// Who is on the other end of a loopback TCP connection (docs/decisions/0111): the kernel records the
// uid that opened every socket, and /proc/net/tcp{,6} lists both ends of a loopback connection, so
// the client's end names its user — what identd did, without trusting anything the client says. The
// user's name is the subject, as the OS user is the principal of a SQLite store everywhere else.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';

import { PidfenceError } from '../base/errors';
import { validateSubject } from '../contract/index';

export interface SocketEnds {
  readonly remoteAddress?: string | undefined;
  readonly remotePort?: number | undefined;
  readonly localAddress?: string | undefined;
  readonly localPort?: number | undefined;
}

const LOOPBACK_V4 = /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;
/** The kernel's state number of an established connection in /proc/net/tcp. */
const ESTABLISHED = '01';

export function isLoopback(address: string | undefined): boolean {
  return address !== undefined && (LOOPBACK_V4.test(address) || address === '::1');
}

/** One 32-bit word of /proc/net/tcp as the kernel printed it: in host byte order. */
function wordBytes(hex: string): number[] {
  const value = Number.parseInt(hex, 16);
  const bytes = [(value >>> 24) & 0xff, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff];
  return endianness() === 'LE' ? bytes.reverse() : bytes;
}

/** `0100007F:1F90` → `127.0.0.1:8080`; IPv6 addresses as `::1` or `::ffff:127.0.0.1`, else their full hex. */
export function parseProcAddress(field: string): string {
  const [hex = '', portHex = ''] = field.split(':');
  const port = Number.parseInt(portHex, 16);
  if (hex.length === 8) return `${wordBytes(hex).join('.')}:${port}`;
  const bytes = [0, 8, 16, 24].flatMap((offset) => wordBytes(hex.slice(offset, offset + 8)));
  const ipv4Mapped = bytes.slice(0, 10).every((byte) => byte === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (ipv4Mapped) return `::ffff:${bytes.slice(12).join('.')}:${port}`;
  if (bytes.slice(0, 15).every((byte) => byte === 0) && bytes[15] === 1) return `::1:${port}`;
  return `${bytes.map((byte) => byte.toString(16).padStart(2, '0')).join('')}:${port}`;
}

/** The uid that owns the client end of this accepted loopback connection, or null when none is found. */
export function findLoopbackPeerUid(
  socket: SocketEnds,
  tables: readonly string[] = ['/proc/net/tcp', '/proc/net/tcp6'],
): number | null {
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (!isLoopback(remoteAddress) || remotePort === undefined || localAddress === undefined || localPort === undefined)
    return null;
  // The client's end: its local address is our remote one, and its remote address ours.
  const clientEnd = `${remoteAddress}:${remotePort}`;
  const serverEnd = `${localAddress}:${localPort}`;
  for (const table of tables) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 8 || fields[3] !== ESTABLISHED) continue;
      if (parseProcAddress(fields[1] ?? '') === clientEnd && parseProcAddress(fields[2] ?? '') === serverEnd) {
        const uid = Number(fields[7]);
        return Number.isSafeInteger(uid) && uid >= 0 ? uid : null;
      }
    }
  }
  return null;
}

/** A uid's user name as the system resolves it (getent: passwd files, LDAP, ...), or undefined. */
function userNameOf(uid: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('getent', ['passwd', String(uid)], { timeout: 2_000, encoding: 'utf8' }, (error, stdout) => {
      resolve(error === null ? stdout.split(':')[0] : undefined);
    });
  });
}

const SUBJECTS_CACHED_MAX = 64;

/** uid → subject, as lib/cli/os-user.ts names the local user: the user name, or `uid-N`. */
export class UidSubjects {
  readonly #known = new Map<number, string>();

  async subjectOf(uid: number): Promise<string> {
    const cached = this.#known.get(uid);
    if (cached !== undefined) return cached;
    let subject = `uid-${uid}`;
    try {
      subject = validateSubject(await userNameOf(uid));
    } catch {
      // No passwd entry, or a name outside the subject alphabet: the uid stands in, as for the CLI.
    }
    if (this.#known.size >= SUBJECTS_CACHED_MAX) this.#known.clear();
    this.#known.set(uid, subject);
    return subject;
  }
}

export function peerUnknown(): PidfenceError {
  return new PidfenceError(
    "the status page answers only connections from this machine whose user it can tell (loopback TCP, found in /proc/net/tcp); open it on this host, or through an SSH tunnel to the server's loopback address.",
    'ERR_PIDFENCE_STATUS_PRINCIPAL',
  );
}
