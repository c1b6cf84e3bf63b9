// PEM files named on the command line (certificates, keys, CAs, CRLs) and the signals the two
// long-running cluster commands live by: SIGTERM/SIGINT end them, SIGHUP reloads their certificates.
import { readFileSync } from 'node:fs';

import { PidfenceError } from '../base/errors';

/** Reads a PEM file; a missing or unreadable one is a typed error naming the option. */
export function readPem(file: string, option: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    throw new PidfenceError(
      `${option} ${file} cannot be read; give the path of a PEM file this user can read.`,
      'ERR_PIDFENCE_CLUSTER_TLS_FILE',
    );
  }
}

/** The files of `--cert`, `--key`, `--ca` and (when given) `--crl`, read now. */
export function readTrustFiles(options: {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
  readonly crl?: string;
}): { cert: string; key: string; ca: string; crl?: string } {
  return {
    cert: readPem(options.cert, '--cert'),
    key: readPem(options.key, '--key'),
    ca: readPem(options.ca, '--ca'),
    ...(options.crl === undefined ? {} : { crl: readPem(options.crl, '--crl') }),
  };
}

/** Resolves at SIGTERM or SIGINT, then removes its listeners. */
export function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const wake = (): void => {
      process.removeListener('SIGTERM', wake);
      process.removeListener('SIGINT', wake);
      resolve();
    };
    process.once('SIGTERM', wake);
    process.once('SIGINT', wake);
  });
}

/**
 * Calls `reload` on every SIGHUP until the returned function is called (docs/decisions/0242): the
 * files are read again and a failure is reported, never fatal, so a bad file keeps the trust in force.
 */
export function reloadOnHangup(reload: () => void, report: (line: string) => void): () => void {
  const onHangup = (): void => {
    try {
      reload();
      report('certificates reloaded');
    } catch (error) {
      const { message, code } = error as { message?: string; code?: string };
      report(`certificates not reloaded: ${message ?? 'unknown failure'} (${code ?? 'ERR_PIDFENCE_CLUSTER_TLS_FILE'})`);
    }
  };
  process.on('SIGHUP', onHangup);
  return () => process.removeListener('SIGHUP', onHangup);
}
