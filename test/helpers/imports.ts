// Reading a layer's import specifiers for the layering tests (design/architecture §2: arrows point one way).
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

export const LIB = path.resolve(__dirname, '..', '..', '..', 'lib');

export function importsOf(file: string): string[] {
  return [
    ...readFileSync(file, 'utf8').matchAll(
      /\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)|require\(\s*'([^']+)'\s*\)/g,
    ),
  ].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
}

/** Every .ts file under `dir`. */
export function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name));
}
