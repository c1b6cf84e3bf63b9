// A wall-clock step for one process tree (docs/decisions/0190): the LD_PRELOAD shim of
// test/fixtures/clock-step.c reads its offset from a file on every clock read, so a test starts
// processes with `env` and moves their CLOCK_REALTIME mid-run with `step`, as an NTP step or a
// router's first sync does; the machine's clock is never touched.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { ensureClockStepShim } from './test-tools';

export const DAY_MS = 86_400_000;

export interface ClockStep {
  /** LD_PRELOAD and the offset file, for every process whose clock this step moves (children inherit it). */
  readonly env: Readonly<Record<string, string>>;
  /** Sets the offset from the real wall clock (not a relative move). */
  step(offsetMs: number): void;
}

export function clockStep(t: ExecutionContext, initialOffsetMs = 0): ClockStep {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-clock-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'offset');
  // Written whole and renamed: the shim never reads half a number.
  const step = (offsetMs: number): void => {
    const partial = `${file}.tmp`;
    writeFileSync(partial, String(Math.trunc(offsetMs)));
    renameSync(partial, file);
  };
  step(initialOffsetMs);
  return { env: { LD_PRELOAD: ensureClockStepShim(), PIDFENCE_CLOCK_STEP_FILE: file }, step };
}
