// docs/decisions/0041: one registry of error codes. Every ERR_PIDFENCE_* written in lib/ or native/
// is registered with a category, and the CLI's exit status follows from the category alone.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { ERROR_CATEGORIES, errorCategory, exitStatusOf, httpStatusOf } from '../../lib/base/error-registry';
import { PidfenceError } from '../../lib/base/errors';
import { CATEGORY_EXIT } from '../../lib/cli/main';
import { LIB, sources } from '../helpers/imports';

const NATIVE = path.resolve(LIB, '..', 'native');

/** Every complete code literal in the package's sources (a code is written out whole, never assembled). */
function codesInSources(): Map<string, string> {
  const files = [...sources(LIB), ...['addon.cc', 'addon_args.h'].map((name) => path.join(NATIVE, name))];
  const found = new Map<string, string>();
  for (const file of files) {
    for (const match of readFileSync(file, 'utf8').matchAll(/ERR_PIDFENCE_[A-Z0-9_]*[A-Z0-9]\b/g)) {
      if (!found.has(match[0])) found.set(match[0], path.relative(path.resolve(LIB, '..'), file));
    }
  }
  return found;
}

test('every ERR_PIDFENCE_* code in lib/ and native/ is in the registry', (t) => {
  const found = codesInSources();
  t.true(found.size > 60, `found only ${found.size} codes: the scan is broken`);
  const missing = [...found].filter(([code]) => !ERROR_CATEGORIES.has(code)).map(([code, file]) => `${code} (${file})`);
  t.deepEqual(missing, [], 'register these codes in lib/base/error-registry.ts');
});

test('the scan would catch an unregistered code: a made-up one is internal, and internal exits 1', (t) => {
  t.false(ERROR_CATEGORIES.has('ERR_PIDFENCE_MADE_UP'));
  t.is(errorCategory('ERR_PIDFENCE_MADE_UP'), 'internal');
  t.is(CATEGORY_EXIT.internal, 1);
});

test('each category has its exit status: input 2, unavailable 3, refused 4, internal 1', (t) => {
  t.deepEqual(CATEGORY_EXIT, { input: 2, unavailable: 3, refused: 4, internal: 1 });
  t.is(errorCategory('ERR_PIDFENCE_MIGRATION_PENDING'), 'unavailable');
  t.is(errorCategory('ERR_PIDFENCE_PG_PRIVILEGE_EXCESS'), 'unavailable');
  t.is(errorCategory('ERR_PIDFENCE_INVALID_CURSOR'), 'input');
  t.is(errorCategory('ERR_PIDFENCE_NOT_PERMITTED'), 'refused');
});

test('one code per condition on every surface, mapped in one place to the exit status and the HTTP status (docs/decisions/0224)', (t) => {
  // A missing run, a finished run: the CLI and the control plane said different codes before.
  t.false(ERROR_CATEGORIES.has('ERR_PIDFENCE_RUN_MISSING'), 'the HTTP-only name of a missing run is gone');
  t.deepEqual([exitStatusOf('ERR_PIDFENCE_RUN_NOT_FOUND'), httpStatusOf('ERR_PIDFENCE_RUN_NOT_FOUND')], [4, 404]);
  t.deepEqual([exitStatusOf('ERR_PIDFENCE_RUN_FINISHED'), httpStatusOf('ERR_PIDFENCE_RUN_FINISHED')], [4, 409]);
  t.deepEqual([exitStatusOf('ERR_PIDFENCE_NOT_PERMITTED'), httpStatusOf('ERR_PIDFENCE_NOT_PERMITTED')], [4, 403]);
  t.deepEqual(
    [exitStatusOf('ERR_PIDFENCE_INVALID_DATABASE_URL'), httpStatusOf('ERR_PIDFENCE_INVALID_DATABASE_URL')],
    [2, 400],
  );
  t.deepEqual(
    [exitStatusOf('ERR_PIDFENCE_STORE_UNAVAILABLE'), httpStatusOf('ERR_PIDFENCE_STORE_UNAVAILABLE')],
    [3, 503],
  );
  t.deepEqual([exitStatusOf('ERR_PIDFENCE_MADE_UP'), httpStatusOf('ERR_PIDFENCE_MADE_UP')], [1, 500]);
  for (const code of ERROR_CATEGORIES.keys())
    t.is(
      exitStatusOf(code) as number,
      CATEGORY_EXIT[errorCategory(code)] as number,
      `${code}: the CLI's exit status is the registry's`,
    );
});

test('an error keeps its cause for a debugger', (t) => {
  const cause = new Error('driver said something with a secret in it');
  const error = new PidfenceError('the store failed; retry.', 'ERR_PIDFENCE_STORE_FAILED', { cause });
  t.is(error.cause, cause);
});
