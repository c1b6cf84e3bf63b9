// Stopping what the job left behind (docs/decisions/0152). Children are listed from
// /proc/self/task/<main thread>/children: only the main thread forks the job, and orphans re-parent
// to it, the first live thread of the subreaper (the job log's copy thread never forks,
// docs/decisions/0250); no signal ever goes to a bare PID.
#define _GNU_SOURCE
#include "leftovers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "held_term.h"
#include "syscalls.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Per round, so a fork storm never exhausts the descriptor limit (1024 by default). */
#define ROUND_MAX_CHILDREN 512

struct child {
  pid_t pid;
  int pidfd;
  int exited;
};

struct children {
  struct child *items;
  size_t count;
  size_t capacity;
};

static int pidfd_open_child(pid_t pid) { return (int)syscall(__NR_pidfd_open, pid, 0); }

static int pidfd_signal(int pidfd, int signal) { return (int)syscall(__NR_pidfd_send_signal, pidfd, signal, NULL, 0); }

static int64_t monotonic_ms(void) {
  struct timespec now;
  if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) return 0;
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

void leftovers_reap_exited(void) {
  for (;;) {
    pid_t pid = waitpid(-1, NULL, WNOHANG);
    if (pid > 0) continue;
    if (pid < 0 && errno == EINTR) continue;
    return; /* 0: live children remain; ECHILD: none */
  }
}

/* Already exited (a zombie)? Asked through the pidfd without reaping; an old kernel says "no". */
static int has_exited(int pidfd) {
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  if (syscall(SYS_waitid, P_PIDFD, pidfd, &info, WEXITED | WNOHANG | WNOWAIT, NULL) != 0) return 0;
  return info.si_pid != 0;
}

static int push(struct children *list, pid_t pid, int pidfd) {
  if (list->count == list->capacity) {
    size_t capacity = list->capacity == 0 ? 64 : list->capacity * 2;
    struct child *items = realloc(list->items, capacity * sizeof(*items));
    if (items == NULL) return -1;
    list->items = items;
    list->capacity = capacity;
  }
  list->items[list->count++] = (struct child){ pid, pidfd, 0 };
  return 0;
}

/*
 * Opens a pidfd on each live child listed by the kernel. A listed child stays this process's until
 * it is reaped here, so the pidfd opened afterwards is that child's. Returns -1 when the list
 * cannot be read at all (no /proc): the caller cannot see its leftovers then.
 */
static int open_live_children(struct children *list) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
  FILE *file = fopen(path, "re");
  if (file == NULL) return -1;
  long pid;
  while (list->count < ROUND_MAX_CHILDREN && fscanf(file, "%ld", &pid) == 1) {
    int pidfd = pidfd_open_child((pid_t)pid);
    if (pidfd < 0) continue; /* ESRCH cannot happen for an unreaped child; EMFILE: the next round */
    if (has_exited(pidfd) || push(list, (pid_t)pid, pidfd) != 0) (void)close(pidfd); /* reaped below, or the next round */
  }
  (void)fclose(file); /* read-only */
  return 0;
}

/*
 * Waits until every child of the list exited or the deadline passed (-1: no deadline); while TERMs are
 * held (NULL: none), it looks again every HELD_TERM_TICK_MS and sends those now due.
 */
static void wait_exits(struct children *list, int64_t deadline_ms, struct held_terms *held) {
  struct pollfd *fds = calloc(list->count, sizeof(*fds));
  for (;;) {
    size_t waiting = 0;
    for (size_t i = 0; i < list->count; i++) {
      if (list->items[i].exited) continue;
      if (fds == NULL) { /* no memory for poll: ask each one, then sleep a tick */
        if (has_exited(list->items[i].pidfd)) list->items[i].exited = 1;
        else waiting++;
        continue;
      }
      fds[waiting].fd = list->items[i].pidfd;
      fds[waiting].events = POLLIN;
      fds[waiting].revents = 0;
      waiting++;
    }
    if (waiting == 0) break;
    int timeout = -1;
    if (deadline_ms >= 0) {
      int64_t left = deadline_ms - monotonic_ms();
      if (left <= 0) break;
      timeout = left > 1000 ? 1000 : (int)left;
    }
    if (held != NULL && held->count > 0 && (timeout < 0 || timeout > HELD_TERM_TICK_MS)) timeout = HELD_TERM_TICK_MS;
    if (fds == NULL) {
      struct timespec tick = { 0, 10 * 1000000L };
      (void)nanosleep(&tick, NULL); /* EINTR only shortens the tick */
      continue;
    }
    int ready = poll(fds, (nfds_t)waiting, timeout);
    if (ready < 0 && errno != EINTR) break;
    for (size_t i = 0, j = 0; i < list->count && ready > 0; i++) {
      if (list->items[i].exited) continue;
      if (fds[j].revents != 0) list->items[i].exited = 1;
      j++;
    }
    if (held != NULL) (void)held_terms_send_ready(held);
  }
  free(fds);
}

/* One round: TERM+CONT (before the deadline) or KILL, wait, KILL the rest, reap. */
static uint32_t stop_round(struct children *list, int64_t deadline_ms) {
  int terminate = monotonic_ms() < deadline_ms;
  uint32_t signalled = 0;
  struct held_terms held;
  held.count = 0;
  for (size_t i = 0; i < list->count; i++) {
    if (terminate && held_term_take(&held, list->items[i].pidfd, list->items[i].pid)) {
      signalled++; /* its TERM goes once it runs its own program, or the KILL below */
      continue;
    }
    if (pidfd_signal(list->items[i].pidfd, terminate ? SIGTERM : SIGKILL) != 0) continue;
    if (terminate) pidfd_signal(list->items[i].pidfd, SIGCONT); /* a stopped process would never see TERM */
    signalled++;
  }
  if (terminate) {
    wait_exits(list, deadline_ms, &held);
    held_terms_clear(&held);
    for (size_t i = 0; i < list->count; i++) {
      if (!list->items[i].exited) pidfd_signal(list->items[i].pidfd, SIGKILL);
    }
  }
  wait_exits(list, -1, NULL); /* after KILL; only an uninterruptible process keeps the launcher here */
  for (size_t i = 0; i < list->count; i++) {
    while (waitpid(list->items[i].pid, NULL, 0) < 0 && errno == EINTR) {
    }
    (void)close(list->items[i].pidfd); /* a pidfd: nothing to flush */
  }
  list->count = 0;
  return signalled;
}

uint32_t leftovers_stop(uint32_t grace_ms) {
  struct children list = { NULL, 0, 0 };
  int64_t deadline_ms = monotonic_ms() + grace_ms;
  uint32_t stopped = 0;
  for (;;) {
    leftovers_reap_exited();
    if (open_live_children(&list) != 0) {
      fprintf(stderr, "pidfence launcher: /proc is not readable, so the job's leftover processes cannot be stopped.\n");
      break;
    }
    if (list.count > 0) {
      stopped += stop_round(&list, deadline_ms);
      continue;
    }
    /* Nothing live listed: done once the kernel agrees that no child is left at all. */
    pid_t pid = waitpid(-1, NULL, WNOHANG);
    if (pid < 0 && errno == ECHILD) break;
    if (pid == 0) {
      struct timespec tick = { 0, 1000000L }; /* a child being re-parented right now: look again */
      (void)nanosleep(&tick, NULL); /* EINTR only shortens the tick */
    }
  }
  free(list.items);
  return stopped;
}
