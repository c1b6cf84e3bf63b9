// Finds and loads the addon: the committed prebuild for this platform first, then a local
// build (node-gyp). A candidate whose baked-in source digest matches the shipped native/
// sources wins; a stale one is used only when nothing current exists, and says so.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { PidfenceError } from '../base/errors';
import type { NativeAddon } from './addon-contract';

export type AddonSource = 'prebuild' | 'build' | 'override';

export type AddonStatus =
  | { readonly loaded: true; readonly source: AddonSource; readonly stale: boolean }
  | { readonly loaded: false; readonly reason: string };

/** Set to `1` to run without the addon: every signalling call then answers `unsupported`. */
export const NO_ADDON_ENV = 'PIDFENCE_NO_ADDON';
/** Set to a `.node` file to load exactly that binary (the arm64 run and prebuild tests use it). */
export const ADDON_PATH_ENV = 'PIDFENCE_ADDON_PATH';

const packageRoot = path.resolve(__dirname, '..', '..', '..');

interface Loaded {
  readonly addon: NativeAddon | null;
  /** Computed when asked: whether the loaded binary is stale needs the source digest. */
  readonly status: () => AddonStatus;
}

let loaded: Loaded | undefined;

function currentSourceDigest(): string | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
    const tool = require(path.join(packageRoot, 'native', 'tools', 'source-digest.js')) as {
      nativeSourceDigest(root: string): string;
    };
    return tool.nativeSourceDigest(packageRoot);
  } catch {
    return null; // an installed package without sources: any loadable binary is as good as any
  }
}

function candidates(): Array<{ source: AddonSource; file: string }> {
  const override = process.env[ADDON_PATH_ENV];
  if (override) return [{ source: 'override', file: path.resolve(override) }];
  const platformArch = `${process.platform}-${process.arch}`;
  return [
    { source: 'prebuild', file: path.join(packageRoot, 'prebuilds', platformArch, `pidfence.${runtimeLibc()}.node`) },
    { source: 'prebuild', file: path.join(packageRoot, 'prebuilds', platformArch, 'pidfence.node') },
    { source: 'build', file: path.join(packageRoot, 'build', 'Release', 'pidfence.node') },
  ];
}

/**
 * The C library this Node runs on. node-gyp-build tells musl only by /etc/alpine-release, which
 * OpenWrt lacks; musl's dynamic loader (`ld-musl-<arch>.so.1`) is mapped into every dynamically
 * linked musl process, and one read of our own maps says so (docs/decisions/0081).
 */
export function runtimeLibc(): 'glibc' | 'musl' {
  try {
    return fs.readFileSync('/proc/self/maps', 'utf8').includes('/ld-musl-') ? 'musl' : 'glibc';
  } catch {
    return 'glibc'; // no /proc: the glibc prebuild is tried, and a local build after it
  }
}

const fixed =
  (status: AddonStatus): (() => AddonStatus) =>
  () =>
    status;

/** A status whose staleness is read from the digest once, when first asked. */
function loadedStatus(source: AddonSource, addon: NativeAddon, digest: () => string | null): () => AddonStatus {
  let status: AddonStatus | undefined;
  return () => {
    const current = digest();
    status ??= { loaded: true, source, stale: current !== null && addon.buildInfo().sourceDigest !== current };
    return status;
  };
}

function loadAddon(): Loaded {
  if (process.env[NO_ADDON_ENV] === '1') {
    return { addon: null, status: fixed({ loaded: false, reason: `disabled by ${NO_ADDON_ENV}=1` }) };
  }
  if (process.platform !== 'linux') {
    return { addon: null, status: fixed({ loaded: false, reason: `no addon for platform ${process.platform}` }) };
  }
  // The source digest (reading and hashing native/) only decides between two binaries; with one
  // there is nothing to choose, and a command's start does not pay for it (docs/decisions/0213).
  const present = candidates().filter((candidate) => fs.existsSync(candidate.file));
  let digestValue: string | null | undefined;
  const digest = (): string | null => (digestValue === undefined ? (digestValue = currentSourceDigest()) : digestValue);
  let fallback: { addon: NativeAddon; source: AddonSource } | undefined;
  const failures: string[] = [];
  for (const candidate of present) {
    let addon: NativeAddon;
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
      addon = require(candidate.file) as NativeAddon;
    } catch (error) {
      failures.push(`${candidate.source}: ${(error as Error).message.split('\n')[0]}`);
      continue;
    }
    addon.setErrorClass(PidfenceError);
    if (present.length === 1) return { addon, status: loadedStatus(candidate.source, addon, digest) };
    const current = digest();
    if (current === null || addon.buildInfo().sourceDigest === current) {
      return { addon, status: fixed({ loaded: true, source: candidate.source, stale: false }) };
    }
    fallback ??= { addon, source: candidate.source };
  }
  if (fallback) return { addon: fallback.addon, status: fixed({ loaded: true, source: fallback.source, stale: true }) };
  const reason =
    failures.length > 0
      ? `no loadable addon (${failures.join('; ')}); run \`npm run build:native\``
      : 'no addon binary found; run `npm run build:native`';
  return { addon: null, status: fixed({ loaded: false, reason }) };
}

function state(): Loaded {
  loaded ??= loadAddon();
  return loaded;
}

/** The raw addon, or null when it is unavailable. Only lib/native uses this. */
export function getAddon(): NativeAddon | null {
  return state().addon;
}

export function addonStatus(): AddonStatus {
  return state().status();
}

/** The raw addon, or a PidfenceError saying why there is none (for non-signalling calls). */
export function requireAddon(): NativeAddon {
  const current = state();
  if (current.addon) return current.addon;
  const status = current.status();
  const reason = status.loaded ? '' : status.reason;
  throw new PidfenceError(
    `pidfence native addon unavailable: ${reason}. Signalling answers 'unsupported' until it loads.`,
    'ERR_PIDFENCE_ADDON_UNAVAILABLE',
  );
}
