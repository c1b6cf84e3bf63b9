// The escape patterns of issue 27 (docs/decisions/0180): jobs that leave processes behind outside
// their process group or parentage. One table for the containment tests and the stop-safety bench,
// so both measure the same scripts. The daemons' sockets go to $TMPDIR, which a test points at a
// directory it removes.

/** A pattern's name, its `sh -c` script, the least number of marked processes it has once running, and the outside program it needs (null: only sh, setsid, perl, nohup and sleep). */
export type EscapePattern = readonly [name: string, script: string, least: number, program: string | null];

export const ESCAPES: readonly EscapePattern[] = [
  ['a setsid child', 'setsid sleep 1000 & sleep 1000', 3, null],
  ['a double-fork daemon (fork, setsid, fork)', '( setsid sh -c "sleep 1000 & exit 0" & ); sleep 1000', 3, null],
  ['a setpgid(0, 0) child', `perl -e 'setpgrp(0, 0); sleep 1000' & sleep 1000`, 3, null],
  ['a nohup child', 'nohup sleep 1000 >/dev/null 2>&1 & sleep 1000', 3, null],
  [
    'dbus-daemon --fork',
    'dbus-daemon --session --fork --address=unix:path=${TMPDIR:-/tmp}/pidfence-bus-$$ && sleep 1000',
    3,
    'dbus-daemon',
  ],
  ['a tmux server', `tmux -S \${TMPDIR:-/tmp}/pidfence-tmux-$$ new-session -d 'sleep 1000' && sleep 1000`, 4, 'tmux'],
  ['ssh-agent', 'ssh-agent -a ${TMPDIR:-/tmp}/pidfence-agent-$$ >/dev/null && sleep 1000', 3, 'ssh-agent'],
];
