// The job's own cgroup (docs/decisions/0180). Every file is reached relative to the descriptor
// opened once from the order's path, so a cgroup renamed or re-created meanwhile is never written
// to; members are signalled only through pidfds whose PIDFD_GET_INFO cgroup id is this cgroup's.
#define _GNU_SOURCE
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "held_term.h"
#include "syscalls.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* struct clone_args up to `cgroup` (CLONE_ARGS_SIZE_VER2, Linux 5.7). */
struct clone_args_v2 {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

/* struct pidfd_info, PIDFD_INFO_SIZE_VER0 (Linux 6.13); the headers here predate it. */
struct pidfd_info_v0 {
  uint64_t mask, cgroupid;
  uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  int32_t exit_code;
};
#define PIDFD_GET_INFO_REQUEST _IOWR(0xFF, 11, struct pidfd_info_v0)
#define PIDFD_INFO_CGROUPID_BIT (1ULL << 2)

int cgroup_open(const char *path) { return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

static int write_text(int dir, const char *file, const char *text) {
  int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t written;
  do {
    written = write(fd, text, strlen(text));
  } while (written < 0 && errno == EINTR);
  int error = errno;
  (void)close(fd); /* a cgroup file: the write above already took effect */
  errno = error;
  return written < 0 ? -1 : 0;
}

pid_t cgroup_fork_into(int fd, int *entered_errno) {
  *entered_errno = 0;
  struct clone_args_v2 args;
  memset(&args, 0, sizeof(args));
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = (uint64_t)fd;
  long pid = syscall(__NR_clone3, &args, sizeof(args));
  if (pid >= 0 || (errno != ENOSYS && errno != E2BIG && errno != EINVAL)) return (pid_t)pid;
  /* An older kernel: the child enters before it can fork or exec anything (born there all the same). */
  pid_t child = fork();
  if (child == 0 && write_text(fd, "cgroup.procs", "0") != 0) *entered_errno = errno;
  return child;
}

static int populated(int dir) {
  int fd = openat(dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENODEV ? 0 : -1; /* removed: it was empty */
  char text[256];
  ssize_t got;
  do {
    got = pread(fd, text, sizeof(text) - 1, 0);
  } while (got < 0 && errno == EINTR);
  (void)close(fd); /* read-only */
  if (got < 0) return errno == ENODEV ? 0 : -1;
  text[got] = '\0';
  const char *line = strstr(text, "populated ");
  return line != NULL && line[10] == '1';
}

static int64_t monotonic_ms(void) {
  struct timespec now;
  if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) return 0;
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/*
 * Waits for `populated 0` told by inotify (deadline -1: none). Returns 1 when empty. While TERMs are
 * held (NULL: none), it looks again every HELD_TERM_TICK_MS and sends those now due.
 */
static int wait_empty(int dir, int64_t deadline_ms, struct held_terms *held) {
  int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d/cgroup.events", dir);
  if (watch >= 0 && inotify_add_watch(watch, path, IN_MODIFY) < 0) {
    (void)close(watch); /* no watch: fall back to a short tick below */
    watch = -1;
  }
  int empty = 0;
  for (;;) {
    int now = populated(dir);
    if (now == 0) { empty = 1; break; }
    int timeout = 100; /* also the tick without inotify, or if a read failed */
    if (deadline_ms >= 0) {
      int64_t left = deadline_ms - monotonic_ms();
      if (left <= 0) break;
      if (left < timeout) timeout = (int)left;
    }
    if (held != NULL && held->count > 0 && timeout > HELD_TERM_TICK_MS) timeout = HELD_TERM_TICK_MS;
    if (watch >= 0) {
      struct pollfd entry = { watch, POLLIN, 0 };
      if (poll(&entry, 1, timeout) > 0) {
        char drain[1024];
        while (read(watch, drain, sizeof(drain)) > 0) {
        }
      }
    } else {
      struct timespec tick = { 0, (long)timeout * 1000000L };
      (void)nanosleep(&tick, NULL); /* EINTR only shortens the tick */
    }
    if (held != NULL) (void)held_terms_send_ready(held);
  }
  if (watch >= 0) (void)close(watch); /* an inotify descriptor: nothing to flush */
  return empty;
}

/* A pidfd on `pid` that proves it is in cgroup `id`, or -1. */
static int member_pidfd(long pid, uint64_t id) {
  int pidfd = (int)syscall(__NR_pidfd_open, (pid_t)pid, 0);
  if (pidfd < 0) return -1; /* exited meanwhile (ESRCH); EMFILE: cgroup.kill still reaches it */
  struct pidfd_info_v0 info;
  memset(&info, 0, sizeof(info));
  info.mask = PIDFD_INFO_CGROUPID_BIT;
  if (ioctl(pidfd, PIDFD_GET_INFO_REQUEST, &info) == 0 && (info.mask & PIDFD_INFO_CGROUPID_BIT) && info.cgroupid == id) {
    return pidfd;
  }
  /* Without PIDFD_GET_INFO (before 6.13) membership cannot be proved: no TERM, cgroup.kill after the grace. */
  (void)close(pidfd); /* a pidfd: nothing to flush */
  return -1;
}

/* Holds the TERM of a member that is still a copy of its parent (docs/decisions/0442); 1 when held. */
static uint32_t hold_member(long pid, uint64_t id, struct held_terms *held) {
  int pidfd = member_pidfd(pid, id);
  if (pidfd < 0) return 0;
  uint32_t taken = (uint32_t)held_term_take(held, pidfd, (pid_t)pid);
  (void)close(pidfd); /* a pidfd: nothing to flush; a held one has its own */
  return taken;
}

/* TERM then CONT to a member whose TERM is not held; 1 when it was reached. */
static uint32_t term_member(long pid, uint64_t id, struct held_terms *held) {
  if (held_term_holds(held, (pid_t)pid)) return 0; /* counted when it was held */
  int pidfd = member_pidfd(pid, id);
  if (pidfd < 0) return 0;
  uint32_t reached = 0;
  if (syscall(__NR_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == 0) {
    (void)syscall(__NR_pidfd_send_signal, pidfd, SIGCONT, NULL, 0); /* a stopped member would never see TERM */
    reached = 1;
  }
  (void)close(pidfd); /* a pidfd: nothing to flush */
  return reached;
}

/* Each member listed in cgroup.procs, given to `act`; the sum of its answers. */
static uint32_t each_member(int dir, uint32_t (*act)(long, uint64_t, struct held_terms *), struct held_terms *held) {
  struct stat st;
  if (fstat(dir, &st) != 0) return 0;
  int fd = openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  FILE *procs = fdopen(fd, "re");
  if (procs == NULL) {
    (void)close(fd); /* read-only */
    return 0;
  }
  uint32_t sum = 0;
  long pid;
  while (fscanf(procs, "%ld", &pid) == 1) sum += act(pid, (uint64_t)st.st_ino, held);
  (void)fclose(procs); /* read-only */
  return sum;
}

uint32_t cgroup_stop_members(int fd, uint32_t grace_ms) {
  if (populated(fd) == 0) return 0;
  int64_t deadline_ms = monotonic_ms() + grace_ms;
  /*
   * Before the freeze: freezing makes a member that has not run yet run into the freezer, and the
   * TERM it then finds pending is taken by the handler it inherited (docs/decisions/0442).
   */
  struct held_terms held;
  held.count = 0;
  uint32_t reached = each_member(fd, hold_member, &held);
  /* Frozen, no member forks or exits: every PID read from cgroup.procs stays its process's. */
  int frozen = write_text(fd, "cgroup.freeze", "1") == 0;
  reached += each_member(fd, term_member, &held);
  if (frozen) (void)write_text(fd, "cgroup.freeze", "0"); /* a failed thaw leaves them to cgroup.kill */
  int emptied = wait_empty(fd, deadline_ms, &held);
  held_terms_clear(&held);
  if (emptied) return reached;
  if (write_text(fd, "cgroup.kill", "1") != 0) {
    fprintf(stderr, "pidfence launcher: cgroup.kill failed (%s); the job's leftovers keep it waiting.\n", strerror(errno));
  }
  (void)wait_empty(fd, -1, NULL); /* only an uninterruptible process keeps the launcher here */
  return reached;
}

void cgroup_remove(const char *path, int fd) {
  struct stat opened, named;
  if (fstat(fd, &opened) != 0 || stat(path, &named) != 0 || opened.st_ino != named.st_ino) return;
  if (rmdir(path) != 0 && errno != ENOENT) {
    fprintf(stderr, "pidfence launcher: the job's cgroup could not be removed (%s).\n", strerror(errno));
  }
}
