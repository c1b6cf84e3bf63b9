// docs/decisions/0042: the stop hint names --db when it is not the default; a job that cannot start
// gets the shell's status (127 / 126) and a sentence; a store is named without its password.
import test from 'ava';

import { parseDurationWithin } from '../../lib/cli/duration';
import { graceNotice, jobStartFailureMessage, stopHint, storeName } from '../../lib/cli/job-messages';
import { START_FAILURE_STATUS, startFailureOf } from '../../lib/execution/index';

test('the stop hint adds --db only for a store that is not the default, quoted for the shell', (t) => {
  t.is(stopHint('run-1', undefined), 'pidfence cancel run-1');
  t.is(stopHint('run-1', 'pidfence.db'), 'pidfence cancel run-1');
  t.is(stopHint('run-1', '/var/lib/jobs.db'), 'pidfence cancel run-1 --db /var/lib/jobs.db');
  t.is(stopHint('run-1', "/tmp/it's here.db"), "pidfence cancel run-1 --db '/tmp/it'\\''s here.db'");
});

test('a command that is missing exits 127, one that is not executable 126, each with a sentence', (t) => {
  t.is(START_FAILURE_STATUS[startFailureOf('ENOENT')], 127);
  for (const errno of ['EACCES', 'EPERM', 'ENOEXEC']) t.is(START_FAILURE_STATUS[startFailureOf(errno)], 126, errno);
  t.is(
    jobStartFailureMessage('command_not_found'),
    'command not found: check its name and $PATH (pidfence runs it without a shell).',
  );
  t.regex(jobStartFailureMessage('permission_denied'), /^permission denied: /);
});

test('the grace line is for a terminal only, and says when the KILL follows', (t) => {
  t.is(graceNotice(false, 'run-1', 5_000), null);
  t.is(
    graceNotice(true, 'run-1', 5_000),
    'pidfence: stopping run run-1: TERM to its process group now, KILL in 5s if it is still running\n',
  );
  t.regex(graceNotice(true, 'run-1', 1_500) ?? '', /KILL in 1\.5s/);
});

test('a store is named by its file, or its URL without the password', (t) => {
  t.is(storeName({ kind: 'sqlite', file: '/srv/p.db' }), '/srv/p.db');
  t.is(storeName({ kind: 'postgres', url: 'postgres://app:hunter2@db:5432/app' }), 'postgres://app:***@db:5432/app');
});

test('durations in any unit up to a cap, refused with the cap in seconds', (t) => {
  t.is(parseDurationWithin('2s', '--grace', 30_000, 0), 2_000);
  t.is(parseDurationWithin('500ms', '--grace', 30_000, 0), 500);
  const error = t.throws(() => parseDurationWithin('2m', '--grace', 30_000, 0));
  t.is(error?.message, '--grace must be from 0s to 30s; you gave 2m (120s).');
  t.is((error as { code?: string }).code, 'ERR_PIDFENCE_INVALID_DURATION');
});
