// readProcessStat: one read() of /proc/<pid>/stat, parsed from the last ')'. The comm torture
// names below break any parser that stops at the first ')'.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import test from 'ava';

import { readProcessStat } from '../../lib/native/index';
import { spawnJob } from '../helpers/processes';

// An independent reading: the fields after comm are counted from the END of the line, so a
// comm full of parentheses and spaces cannot shift them. Field 3 (state) is index 0 here.
// The field count comes from init's line (comm "systemd", "init", ...: no parentheses), not
// from /proc/self, which qemu-user answers with a synthetic line of its own.
function fieldsAfterComm(pid: number): string[] {
  const reference = fs.readFileSync('/proc/1/stat', 'utf8').trim();
  const fieldsTotal = reference.slice(reference.lastIndexOf(')') + 2).split(' ').length;
  const tokens = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').trim().split(' ');
  return tokens.slice(tokens.length - fieldsTotal);
}

for (const name of ['a) b (c', ') ) )', '(()']) {
  test(`readProcessStat parses comm ${JSON.stringify(name)} to the fields an independent parser reads`, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-comm-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const link = path.join(dir, name);
    fs.symlinkSync('/bin/sleep', link);
    const job = spawnJob(t, link, ['30']);
    // The kernel sets comm at exec; the first stat read may still see the pre-exec name.
    for (let i = 0; i < 100 && !fs.readFileSync(`/proc/${job.identity.pid}/comm`, 'utf8').startsWith(name); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    t.is(fs.readFileSync(`/proc/${job.identity.pid}/comm`, 'utf8').trimEnd(), name);
    const stat = readProcessStat(job.identity.pid);
    const fields = fieldsAfterComm(job.identity.pid);
    t.truthy(stat);
    t.is(stat?.pid, job.identity.pid);
    // D: a loaded machine can catch the job in an uninterruptible wait (a page fault's I/O) at that instant.
    t.regex(stat?.state ?? '', /^[RSD]$/, 'sleeping, running, or in a disk wait at the instant of the read');
    t.regex(fields[0] ?? '', /^[RSD]$/);
    t.is(stat?.ppid, Number(fields[1]));
    t.is(stat?.pgid, Number(fields[2]));
    t.is(stat?.sid, Number(fields[3]));
    t.is(stat?.startTicks, fields[19]);
    t.is(stat?.pgid, job.identity.pid, 'a detached child leads its own group');
    t.is(stat?.startTicks, job.identity.startTicks);
  });
}

test('readProcessStat returns null for a process that does not exist', (t) => {
  // PID_MAX_LIMIT itself is never handed out while pid_max is below it (default 4194304 is
  // exclusive), so this PID cannot exist.
  t.is(readProcessStat(4_194_304), null);
});

test('readProcessStat keeps start ticks as an exact decimal string', (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const stat = readProcessStat(job.identity.pid);
  t.truthy(stat);
  t.regex(stat?.startTicks ?? '', /^(0|[1-9][0-9]*)$/);
  t.is(stat?.startTicks, fieldsAfterComm(job.identity.pid)[19]);
});
