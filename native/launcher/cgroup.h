// The job's own cgroup (docs/decisions/0180): the runner creates it and names it in the order; the
// launcher starts the job inside it (clone3 CLONE_INTO_CGROUP, or the child enters it before exec
// on a kernel without that flag), and at the job's end stops every member still in it and removes it.
#ifndef PIDFENCE_LAUNCHER_CGROUP_H
#define PIDFENCE_LAUNCHER_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

/* Opens the cgroup directory; -1 (errno set) when it cannot be used. */
int cgroup_open(const char *path);

/*
 * fork() whose child is born in the cgroup `fd`: 0 in the child, its PID in the parent, -1 with
 * errno. Where clone3 lacks CLONE_INTO_CGROUP (before 5.7) the child writes itself into the
 * cgroup before it returns, and *entered_errno is set there if that failed (the caller reports it
 * and must not exec).
 */
pid_t cgroup_fork_into(int fd, int *entered_errno);

/*
 * The job's leader ended: if members remain, freeze, TERM (then CONT) each member proved by its
 * pidfd to be in the cgroup, thaw, wait until `populated 0` (inotify) or grace_ms, cgroup.kill,
 * wait for `populated 0`. Returns how many processes it reached with TERM.
 */
uint32_t cgroup_stop_members(int fd, uint32_t grace_ms);

/* Removes the (empty) cgroup at `path` if it is still the directory `fd` opened. */
void cgroup_remove(const char *path, int fd);

#endif
