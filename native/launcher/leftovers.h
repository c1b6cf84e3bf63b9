// Leftovers (docs/decisions/0152): processes still alive under the launcher, a child subreaper,
// after the job's leader ended. Each is stopped through a pidfd on the launcher's own unreaped
// child: only the launcher can reap it, so its PID cannot be reused while the pidfd is opened.
#ifndef PIDFENCE_LAUNCHER_LEFTOVERS_H
#define PIDFENCE_LAUNCHER_LEFTOVERS_H

#include <stdint.h>

/*
 * TERM (then CONT) every live child, wait until they exit or grace_ms passed since the first TERM,
 * KILL the rest, reap, and repeat with the children that re-parented meanwhile until none is left
 * (ECHILD). Returns how many distinct live processes it signalled.
 */
uint32_t leftovers_stop(uint32_t grace_ms);

/* Reaps every child that already exited, without waiting. */
void leftovers_reap_exited(void);

#endif
