// The header every benchmark prints first (STYLE.md): machine, date, command, load.
import * as fs from 'node:fs';
import * as os from 'node:os';

import { capabilities } from '../../lib/native/index';

function cpuModel(): string {
  return os.cpus()[0]?.model.trim() ?? 'unknown CPU';
}

export function machineHeader(extra: readonly string[] = []): string {
  const [one, five, fifteen] = os.loadavg().map((load) => load.toFixed(2));
  let kernel = os.release();
  try {
    kernel = fs.readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  } catch {
    // os.release() is the same string; /proc only matters inside odd containers.
  }
  return [
    `- machine: ${cpuModel()}, ${os.cpus().length} CPUs, ${os.arch()}, Linux ${kernel}, node ${process.version}`,
    `- date: ${new Date().toISOString()}`,
    `- command: ${[process.argv0, ...process.argv.slice(1).map((arg) => pathFromCwd(arg))].join(' ')}`,
    `- load average at start (1/5/15 min): ${one} / ${five} / ${fifteen}, nice ${os.getPriority()}`,
    ...extra.map((line) => `- ${line}`),
  ].join('\n');
}

/** Keeps machine-specific absolute paths out of output that gets pasted into docs/. */
function pathFromCwd(arg: string): string {
  const cwd = process.cwd();
  return arg.startsWith(`${cwd}/`) ? arg.slice(cwd.length + 1) : arg;
}

/** The title, the machine header and the kernel's signalling features, for benchmarks that signal processes. */
export function printSignallingHeader(title: string, method: string): void {
  const caps = capabilities();
  console.log(`# ${title}\n`);
  console.log(
    machineHeader([
      `kernel features: groupSignalMode ${caps.groupSignalMode}, pidfsIdentity ${caps.pidfsIdentity}`,
      `method: ${method}`,
    ]),
  );
}

/** Runs a benchmark's main in a scratch directory (removed afterwards) and prints its lines; a failure is its stack on stderr and exit 1. */
export function runBenchmark(prefix: string, main: (dir: string) => Promise<readonly string[]>): void {
  const dir = fs.mkdtempSync(`${os.tmpdir()}/${prefix}`);
  main(dir)
    .then((lines) => {
      process.stdout.write(`${lines.join('\n')}\n`);
    })
    .catch((error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    })
    .finally(() => {
      fs.rmSync(dir, { recursive: true, force: true });
    });
}
