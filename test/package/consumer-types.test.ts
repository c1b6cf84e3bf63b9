// Types that resolve for every common consumer (issue 33 item 3; docs/decisions/0222): the packed
// package installed into fresh projects, then a strict consumer (skipLibCheck off) compiled as an
// ES module and as CommonJS, under moduleResolution node16, nodenext, bundler and node10 (no
// esModuleInterop), with the TypeScript this repository builds with and the one `npm install
// typescript` gives today (TypeScript 7 no longer has node10). The edge project installs pidfence
// alone: its declarations must need neither @types/node nor any driver's types. The full project adds
// the optional peers (pg with @types/pg, fastify, prom-client) and imports every entry.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import test from 'ava';

import { packageRoot } from '../../lib/store/migrations';
import { installPacked, installedVersion, packInto, type PackResult } from '../helpers/packed-install';

const root = packageRoot();
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-types-'));
let packed: PackResult | undefined;
function tarball(): string {
  packed ??= packInto(workDir);
  return path.join(workDir, packed.filename);
}
test.after.always(() => fs.rmSync(workDir, { recursive: true, force: true }));

const COMPILERS = [
  {
    name: `TypeScript ${installedVersion(path.join(root, 'node_modules'), 'typescript')} (this repository's)`,
    tsc: path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
    node10: true,
  },
  {
    name: `TypeScript ${installedVersion(path.join(root, 'node_modules'), 'typescript-current')} (npm's latest)`,
    tsc: path.join(root, 'node_modules', 'typescript-current', 'bin', 'tsc'),
    node10: false,
  },
] as const;

type Kind = 'module' | 'commonjs';
type Resolution = 'node16' | 'nodenext' | 'bundler' | 'node10';
const MODULE_OF: Readonly<Record<Resolution, string>> = {
  node16: 'node16',
  nodenext: 'nodenext',
  bundler: 'esnext',
  node10: 'commonjs',
};

/** A consumer as strict as TypeScript gets, checking pidfence's declarations too; no `types`: the compiler's default. */
function tsconfig(resolution: Resolution): object {
  return {
    compilerOptions: {
      strict: true,
      skipLibCheck: false,
      noEmit: true,
      target: 'es2022',
      module: MODULE_OF[resolution],
      moduleResolution: resolution,
    },
    files: ['consumer.ts'],
  };
}

const EDGE_CONSUMER = `import { PidfenceError, native } from 'pidfence';
import { openSqliteStore, type SqliteDatabase, type SqliteStore } from 'pidfence/sqlite';
import * as contract from 'pidfence/contract';
import type { RunRecord } from 'pidfence/contract';
import type { DispatchRepository, RunStore } from 'pidfence/store';
import { LocalProcessController, spawnGroupLeader, type SpawnedJob } from 'pidfence/process';
import * as controller from 'pidfence/controller';
import { capabilities } from 'pidfence/native';
import * as dispatch from 'pidfence/dispatch';
import * as management from 'pidfence/management';
import { createExecution } from 'pidfence/execution';

export async function firstRun(file: string): Promise<RunRecord | null> {
  const store: SqliteStore = openSqliteStore(file);
  const database: SqliteDatabase = store.database;
  try {
    return database.open ? await store.runStore.getRun('run-none') : null;
  } finally {
    store.close();
  }
}
export function start(): SpawnedJob {
  const job = spawnGroupLeader('sleep', ['1'], { stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: '/usr/bin' } });
  job.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => chunk.length);
  job.child.once('exit', (code: number | null) => code);
  return job;
}
export type Stores = DispatchRepository | RunStore;
export const seen = [PidfenceError, native, contract, controller, capabilities, dispatch, management, createExecution, LocalProcessController];
`;

const FULL_CONSUMER = `${EDGE_CONSUMER}
import { grantRuntime, migratePostgres, openPostgresStore, type PostgresStore, type PostgresTarget } from 'pidfence/postgres';
import { ControlPlaneClient, startControlPlane, startWorker, type ControlPlaneOptions } from 'pidfence/cluster';
import { createMetrics, type Metrics } from 'pidfence/metrics';

export type Targets = PostgresTarget | PostgresStore;
export type Scraped = Metrics['exposition'];
export const cluster = [grantRuntime, migratePostgres, openPostgresStore, ControlPlaneClient, startControlPlane, startWorker, createMetrics];
export function tlsOf(options: ControlPlaneOptions): ControlPlaneOptions['tls'] {
  return options.tls;
}
`;

/** Compiles `source` as a `kind` package beside the project's node_modules, in every setting the compiler has; returns the failures. */
function compileEverywhere(
  project: string,
  source: string,
  kind: Kind,
  compiler: (typeof COMPILERS)[number],
): string[] {
  const dir = path.join(project, `${kind}-${compiler.node10 ? 'repository' : 'current'}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: `consumer-${kind}`, version: '1.0.0', private: true, type: kind }),
  );
  fs.writeFileSync(path.join(dir, 'consumer.ts'), source);
  // node10 resolves CommonJS only, and TypeScript 7 has removed it.
  const resolutions: Resolution[] = [
    'node16',
    'nodenext',
    'bundler',
    ...(kind === 'commonjs' && compiler.node10 ? ['node10' as const] : []),
  ];
  const failures: string[] = [];
  for (const resolution of resolutions) {
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig(resolution)));
    const result = spawnSync(process.execPath, [compiler.tsc, '-p', 'tsconfig.json'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 240_000,
    });
    if (result.status !== 0)
      failures.push(
        `${compiler.name}, ${kind} project, moduleResolution ${resolution}:\n${result.stdout}${result.stderr}`,
      );
  }
  return failures;
}

let edge: string | undefined;
/** pidfence installed alone: its node_modules. */
function edgeInstall(): string {
  edge ??= installPacked(tarball(), path.join(workDir, 'edge'));
  return edge;
}
let full: string | undefined;
/** pidfence with its optional peers: its node_modules. */
function fullInstall(): string {
  const peers = ['pg', '@types/pg', 'fastify', 'prom-client'].map(
    (name) => `${name}@${installedVersion(path.join(root, 'node_modules'), name)}`,
  );
  full ??= installPacked(tarball(), path.join(workDir, 'full'), peers);
  return full;
}

test('installed alone, pidfence brings no @types package and no HTTP framework', (t) => {
  const modules = edgeInstall();
  for (const absent of ['@types', 'fastify', 'prom-client', 'pg'])
    t.false(fs.existsSync(path.join(modules, absent)), `${absent} is not installed`);
});

// One test per compiler and kind of package, so that each finishes well within the suite's timeout.
for (const compiler of COMPILERS) {
  for (const kind of ['module', 'commonjs'] as const) {
    test(`${compiler.name}, ${kind === 'module' ? 'an ES module' : 'a CommonJS'} project: a strict consumer of every edge entry compiles against pidfence alone under node16, nodenext, bundler${kind === 'commonjs' && compiler.node10 ? ' and node10 (no esModuleInterop)' : ''}`, (t) => {
      t.deepEqual(compileEverywhere(path.dirname(edgeInstall()), EDGE_CONSUMER, kind, compiler), []);
    });
    test(`${compiler.name}, ${kind === 'module' ? 'an ES module' : 'a CommonJS'} project: with the optional peers installed (pg, @types/pg, fastify, prom-client), a consumer of every entry compiles in the same settings`, (t) => {
      t.deepEqual(compileEverywhere(path.dirname(fullInstall()), FULL_CONSUMER, kind, compiler), []);
    });
  }
}
