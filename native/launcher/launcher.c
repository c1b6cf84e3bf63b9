// The pidfence launcher (design/execution §2, docs/decisions/0050, 0071, 0150-0153, 0250): the
// process group leader that reads its order from fd 3, starts the job in its own group (its output
// kept in the job's log), waits for it, stops what the job left behind (it is a child subreaper),
// writes the completion receipt and exits with the job's status. With a cgroup in the order the job
// is born in it, and the job's end waits for the cgroup to be empty (docs/decisions/0180). It ignores TERM/INT/HUP, so a group
// stop reaches the job while the launcher stays to record how the job ended; a group KILL ends both
// (no receipt).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "job_log.h"
#include "leftovers.h"
#include "order.h"
#include "receipt.h"

#ifndef PIDFENCE_LAUNCHER_SOURCE_DIGEST
#error "PIDFENCE_LAUNCHER_SOURCE_DIGEST must be defined (node native/tools/source-digest.js launcher)"
#endif

#define ORDER_FD 3
#define EXIT_NO_ORDER 2
/* The statuses shells use (lib/execution/start-failure.ts). */
#define EXIT_NOT_EXECUTABLE 126
#define EXIT_NOT_FOUND 127

static const int IGNORED_SIGNALS[] = { SIGTERM, SIGINT, SIGHUP };

static void refuse(const char *why) {
  fprintf(stderr, "pidfence launcher: no usable order on fd 3 (%s); it is started by pidfence, not by hand.\n", why);
  exit(EXIT_NO_ORDER);
}

/* Reads fd 3 to EOF (bounded) and closes it; the buffer is the caller's. */
static unsigned char *read_order(size_t *size) {
  size_t capacity = 4096, used = 0;
  unsigned char *bytes = malloc(capacity);
  if (bytes == NULL) refuse("no memory");
  for (;;) {
    if (used == capacity) {
      if (capacity > ORDER_MAX_BYTES) refuse("it is larger than the order limit");
      capacity *= 2;
      unsigned char *grown = realloc(bytes, capacity);
      if (grown == NULL) refuse("no memory");
      bytes = grown;
    }
    ssize_t got = read(ORDER_FD, bytes + used, capacity - used);
    if (got < 0) {
      if (errno == EINTR) continue;
      refuse(errno == EBADF ? "fd 3 is not open" : strerror(errno));
    }
    if (got == 0) break;
    used += (size_t)got;
  }
  if (used > ORDER_MAX_BYTES) refuse("it is larger than the order limit");
  if (close(ORDER_FD) != 0 && errno != EINTR) refuse(strerror(errno));
  *size = used;
  return bytes;
}

/*
 * Returns sigaction's result. It fails only with EINVAL, for a number the C library keeps for
 * itself (glibc and musl reserve 32-34 for threads) or for KILL/STOP; those keep their default.
 */
static int set_disposition(int signal, void (*handler)(int)) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  return sigaction(signal, &action, NULL);
}

/* The kernel's lowest priority (nicest value). */
#define NICE_MAX 19

/*
 * In the forked child: the job runs `increment` nicer than the launcher, at most NICE_MAX, so the
 * runner's control path keeps the CPU ahead of its jobs (docs/decisions/0441). Returns 0 or an errno.
 */
static int job_nice_lower(uint32_t increment) {
  if (increment == 0) return 0;
  errno = 0;
  int current = getpriority(PRIO_PROCESS, 0);
  if (current == -1 && errno != 0) return errno;
  int target = current + (int)increment > NICE_MAX ? NICE_MAX : current + (int)increment;
  return setpriority(PRIO_PROCESS, 0, target) == 0 ? 0 : errno;
}

static void report_errno(int report, int error) {
  ssize_t written;
  do {
    written = write(report, &error, sizeof(error));
  } while (written < 0 && errno == EINTR);
}

/* In the forked child: its niceness, default dispositions, empty mask, exec; the errno goes back on `report`. */
static void exec_job(const struct launch_order *order, int report) {
  int nice_errno = job_nice_lower(order->nice_increment);
  if (nice_errno != 0) {
    report_errno(report, nice_errno);
    _exit(EXIT_NOT_FOUND);
  }
  job_log_attach_child();
  for (int signal = 1; signal < NSIG; signal++) {
    if (signal != SIGKILL && signal != SIGSTOP) (void)set_disposition(signal, SIG_DFL); /* EINVAL only: see above */
  }
  sigset_t none;
  sigemptyset(&none);
  (void)sigprocmask(SIG_SETMASK, &none, NULL); /* cannot fail with a valid set and how */
  execvp(order->argv[0], order->argv);
  report_errno(report, errno);
  _exit(EXIT_NOT_FOUND);
}

/* The job's cgroup descriptor, or -1 (group containment): opened before the job starts. */
static int job_cgroup = -1;

/* fork(), or the same with the child born in the job's cgroup; the child reports a failed entry. */
static pid_t fork_job(int report) {
  if (job_cgroup < 0) return fork();
  int entered_errno = 0;
  pid_t pid = cgroup_fork_into(job_cgroup, &entered_errno);
  if (pid == 0 && entered_errno != 0) {
    report_errno(report, entered_errno);
    _exit(EXIT_NOT_FOUND);
  }
  return pid;
}

/* Starts the job in this process group. Returns its PID, or -1 with *start_errno set. */
static pid_t start_job(const struct launch_order *order, int *start_errno) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    *start_errno = errno;
    return -1;
  }
  pid_t pid = fork_job(report[1]);
  if (pid < 0) {
    *start_errno = errno;
    (void)close(report[0]); /* a pipe end: nothing buffered to lose */
    (void)close(report[1]); /* a pipe end: nothing buffered to lose */
    return -1;
  }
  if (pid == 0) {
    (void)close(report[0]); /* a pipe end: nothing buffered to lose */
    exec_job(order, report[1]);
  }
  (void)close(report[1]); /* a pipe end: nothing buffered to lose */
  int error = 0;
  ssize_t got;
  do {
    got = read(report[0], &error, sizeof(error));
  } while (got < 0 && errno == EINTR);
  (void)close(report[0]); /* a pipe end: nothing buffered to lose */
  if (got == (ssize_t)sizeof(error)) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    *start_errno = error;
    return -1;
  }
  return pid; /* EOF: exec closed the pipe, the job runs */
}

/* Waits for the job's leader; orphans that end meanwhile are reaped on the way. */
static int wait_job(pid_t job) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid == job) return status;
    if (pid < 0 && errno != EINTR) {
      fprintf(stderr, "pidfence launcher: waiting for the job failed (%s).\n", strerror(errno));
      return -1;
    }
  }
}

static int start_failure_status(int error) {
  return error == EACCES || error == EPERM || error == ENOEXEC ? EXIT_NOT_EXECUTABLE : EXIT_NOT_FOUND;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--source-digest") == 0) {
    puts(PIDFENCE_LAUNCHER_SOURCE_DIGEST);
    return 0;
  }
  size_t size;
  unsigned char *bytes = read_order(&size);
  struct launch_order order;
  const char *problem = order_parse(bytes, size, &order);
  if (problem != NULL) refuse(problem);
  free(bytes);
  for (size_t i = 0; i < sizeof(IGNORED_SIGNALS) / sizeof(IGNORED_SIGNALS[0]); i++) {
    if (set_disposition(IGNORED_SIGNALS[i], SIG_IGN) != 0) {
      fprintf(stderr, "pidfence launcher: cannot ignore TERM/INT/HUP (%s); the job was not started.\n", strerror(errno));
      return EXIT_NO_ORDER;
    }
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    fprintf(stderr, "pidfence launcher: cannot become a child subreaper (%s); leftovers re-parent elsewhere.\n", strerror(errno));
  }
  if (order.cgroup_path != NULL && (job_cgroup = cgroup_open(order.cgroup_path)) < 0) {
    fprintf(stderr, "pidfence launcher: the job's cgroup cannot be opened (%s); the job was not started.\n", strerror(errno));
    return EXIT_NO_ORDER;
  }
  job_log_open(&order);

  struct job_end end;
  memset(&end, 0, sizeof(end));
  end.started_at_ms = wall_ms();
  end.started_boot_ms = boot_ms();
  int start_errno = 0;
  pid_t job = start_job(&order, &start_errno);
  job_log_started();
  int exit_status;
  if (job < 0) {
    end.spawn_failed = 1;
    end.exit_code = start_failure_status(start_errno);
    exit_status = end.exit_code;
  } else {
    int status = wait_job(job);
    if (status >= 0 && WIFSIGNALED(status)) {
      end.exit_code = -1;
      end.signal = WTERMSIG(status);
      exit_status = 128 + end.signal;
    } else {
      end.exit_code = status >= 0 ? WEXITSTATUS(status) : EXIT_NOT_FOUND;
      exit_status = end.exit_code;
    }
  }
  if (order.leftovers == LEFTOVERS_STOP) {
    if (job_cgroup >= 0) end.leftovers = cgroup_stop_members(job_cgroup, order.grace_ms);
    end.leftovers += leftovers_stop(order.grace_ms); /* anything that left the cgroup but not the launcher's tree */
    if (job_cgroup >= 0) cgroup_remove(order.cgroup_path, job_cgroup);
  } else {
    leftovers_reap_exited();
  }
  job_log_finish(order.leftovers == LEFTOVERS_KEEP);
  end.finished_at_ms = wall_ms();
  end.finished_boot_ms = boot_ms();
  receipt_write(&order, &end);
  return exit_status;
}
