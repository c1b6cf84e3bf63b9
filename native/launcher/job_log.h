// The job's log (docs/decisions/0250): the launcher owns the job's stdout and stderr and copies what
// arrives into <logDirectory>/<runId>.log (0600, rotated at a size cap) and, where asked, to its own
// fd 1 / fd 2, so the log outlives the runner and a foreground run still shows the output.
#ifndef PIDFENCE_LAUNCHER_JOB_LOG_H
#define PIDFENCE_LAUNCHER_JOB_LOG_H

#include "order.h"

/*
 * Before the job is started: opens the log, makes the job's two streams (a pipe each, or a
 * pseudo-terminal where the launcher's own fd is a terminal) and starts the copying thread. Does
 * nothing when the order keeps no log; if the streams cannot be made, the job inherits the
 * launcher's fds as before (said once on stderr). Never stops the job from starting.
 */
void job_log_open(const struct launch_order *order);

/* In the forked child, before exec: fds 1 and 2 become the job's streams. Async-signal-safe. */
void job_log_attach_child(void);

/* In the launcher once the job was started (or failed to start): closes the job's ends here. */
void job_log_started(void);

/*
 * Once the job and its leftovers ended: copies what is left (until every writer closed, or
 * FINISH_QUIET_MS without output, at most FINISH_MAX_MS), notes dropped output, closes everything.
 * With `keep_writers` (leftovers kept) and a stream still open, a drainer process goes on copying
 * until its writers close.
 */
void job_log_finish(int keep_writers);

#endif
