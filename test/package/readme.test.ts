// The README as a newcomer follows it (issue 33 item 1): the package packed and installed into a
// fresh project, then the quick start's commands run verbatim through `npx pidfence` (the output
// and exit codes it shows must be what they print), and the library example compiled as it is
// written, in an ES module project with `tsc --init`'s settings and in a CommonJS one, then run.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { packageRoot } from '../../lib/store/migrations';
import { installPacked, packInto } from '../helpers/packed-install';
import {
  boundCommand,
  fencedBlocks,
  matchOutput,
  sectionOf,
  transcriptBlocks,
  type IdBindings,
  type TranscriptBlock,
} from '../helpers/readme-transcript';

const root = packageRoot();
const README = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const COMMAND_TIMEOUT_MS = 60_000;

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-readme-'));
let project: string | undefined;
/** One packed install shared by both tests: the project a newcomer made with `npm install pidfence`. */
function consumerProject(): string {
  if (project === undefined) {
    const packed = packInto(workDir);
    project = path.dirname(installPacked(path.join(workDir, packed.filename), path.join(workDir, 'consumer')));
  }
  return project;
}
test.after.always(() => fs.rmSync(workDir, { recursive: true, force: true }));

/** The shell a newcomer types into: their own environment, without any pidfence setting of ours. */
function shellEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PIDFENCE_')));
}

/** A command line as a shell runs it, after the `export` lines seen so far; stderr joins stdout. */
function script(exports: readonly string[], command: string): string {
  return `${exports.join('\n')}\n{ ${command}\n} 2>&1`;
}

function checkOutput(
  t: ExecutionContext,
  command: string,
  expected: readonly string[],
  output: string,
  ids: IdBindings,
): void {
  const { missing, extra } = matchOutput(expected, output, ids);
  t.deepEqual({ missing, extra }, { missing: [], extra: [] }, `\`${command}\` printed:\n${output}`);
}

interface Background {
  readonly command: string;
  readonly expected: readonly string[];
  readonly output: () => string;
  readonly ended: Promise<void>;
}

/** Starts a background block's command and waits until its first expected line was printed. */
async function startBackground(
  t: ExecutionContext,
  cwd: string,
  exports: readonly string[],
  block: TranscriptBlock,
  ids: IdBindings,
): Promise<Background> {
  t.is(block.commands.length, 1, 'a background block holds one command');
  const { command, expected } = block.commands[0]!;
  const child = spawn('bash', ['-c', script(exports, boundCommand(command, ids))], {
    cwd,
    env: shellEnv(),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const ended = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const first = expected.slice(0, 1);
  const deadline = Date.now() + COMMAND_TIMEOUT_MS;
  while (matchOutput(first, output, new Map(ids)).missing.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  matchOutput(first, output, ids);
  return { command, expected, output: () => output, ended };
}

test('the quick start runs verbatim with npx pidfence in a fresh project and prints what the README shows', async (t) => {
  const cwd = consumerProject();
  const blocks = transcriptBlocks(sectionOf(README, 'Quick start'));
  t.true(
    blocks.some((block) => block.mode === 'background'),
    'the quick start has a second terminal',
  );
  t.true(
    blocks.flatMap((block) => block.commands).some((command) => /npx pidfence cancel/.test(command.command)),
    'it cancels a job',
  );
  const ids: IdBindings = new Map();
  const background: Background[] = [];
  for (const block of blocks) {
    // Each block is a terminal of its own: its exports start empty.
    const exports: string[] = [];
    if (block.mode === 'background') {
      background.push(await startBackground(t, cwd, exports, block, ids));
      continue;
    }
    for (const { command, expected } of block.commands) {
      if (command.startsWith('export ')) {
        exports.push(command);
        continue;
      }
      const run = spawnSync('bash', ['-c', script(exports, boundCommand(command, ids))], {
        cwd,
        env: shellEnv(),
        encoding: 'utf8',
        timeout: COMMAND_TIMEOUT_MS,
      });
      checkOutput(t, command, expected, run.stdout, ids);
    }
  }
  for (const job of background) {
    await Promise.race([job.ended, new Promise((resolve) => setTimeout(resolve, COMMAND_TIMEOUT_MS))]);
    checkOutput(t, job.command, job.expected, job.output(), ids);
  }
  t.true(fs.existsSync(path.join(cwd, 'pidfence.db')), 'the store is the file PIDFENCE_DB names');
});

/** `tsc --init`'s settings of the TypeScript this repository builds with, checks made strict on library types too. */
const TSC_INIT: object = {
  compilerOptions: {
    module: 'nodenext',
    target: 'esnext',
    types: [],
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    strict: true,
    verbatimModuleSyntax: true,
    isolatedModules: true,
    noUncheckedSideEffectImports: true,
    moduleDetection: 'force',
    skipLibCheck: false,
  },
  files: ['example.ts'],
};
/** A CommonJS project (`npm init -y`): import syntax compiles to require(), so no verbatimModuleSyntax. */
const COMMONJS: object = {
  compilerOptions: { module: 'nodenext', target: 'es2022', types: [], strict: true, skipLibCheck: false },
  files: ['example.ts'],
};

test('the library example compiles as written in an ES module and a CommonJS project (strict, skipLibCheck off) and prints what its comment says', (t) => {
  const [example] = fencedBlocks(sectionOf(README, 'The library in one example'), 'ts');
  t.truthy(example, 'the section has a ts block');
  const promised = /console\.log\([^)]*\); \/\/ (\w+)/.exec(example ?? '')?.[1];
  t.truthy(promised, 'the example says what it prints');
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  for (const [kind, tsconfig] of [
    ['module', TSC_INIT],
    ['commonjs', COMMONJS],
  ] as const) {
    const dir = path.join(consumerProject(), kind);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({ name: `example-${kind}`, version: '1.0.0', type: kind }),
    );
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
    fs.writeFileSync(path.join(dir, 'example.ts'), example ?? '');
    const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: COMMAND_TIMEOUT_MS,
    });
    t.is(compiled.status, 0, `tsc in the ${kind} project:\n${compiled.stdout}${compiled.stderr}`);
    const ran = spawnSync(process.execPath, ['example.js'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: COMMAND_TIMEOUT_MS,
    });
    t.is(ran.status, 0, ran.stderr);
    t.is(ran.stdout, `${promised}\n`, `node example.js in the ${kind} project`);
  }
});
