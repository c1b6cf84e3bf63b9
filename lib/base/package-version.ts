// The version in the package's own package.json, three levels above dist/lib/<layer> both in a
// checkout and in an installed package: what `pidfence --version` prints and a worker announces.
import { readFileSync } from 'node:fs';
import path from 'node:path';

export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as {
    version?: unknown;
  };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}
