/* The C floor for bench/signal-latency: the same syscalls as native/pidfd.cc signal_verified,
 * with no N-API, no validation and no result object, so the JS rows can be read as
 * "overhead over what the kernel costs". Compiled at run time with cc -O2 by the benchmark.
 *
 * Usage: signal-floor <pid> <samples> <batch> <signo>...
 * Prints one line per row: "<row> <ns/op of batch 1> <ns/op of batch 2> ...". Each sample is
 * the mean over <batch> operations, so clock reads cost the same in C and in JS. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Installed kernel headers may predate these, as in native/pidfd.cc. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1u << 2)
#endif

/* Operations before the first timed sample: page in code, warm caches and the dentry path. */
#define WARMUP_OPS 500

static pid_t target;
static uint64_t expected_start_ticks;
static uint64_t expected_ino;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "signal-floor: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* Parses from the last ')' (comm may contain ')' and spaces), as native/proc_stat.cc does. */
static int stat_parse(const char *line, size_t length, char *state, long *pgid, uint64_t *start) {
  const char *close_paren = NULL;
  for (const char *p = line + length; p > line; --p) {
    if (p[-1] == ')') { close_paren = p - 1; break; }
  }
  if (close_paren == NULL || line + length - close_paren < 3) return -1;
  const char *p = close_paren + 2;
  const char *end = line + length;
  *state = *p++;
  for (int field = 4; field <= 22; ++field) {
    if (p >= end || *p != ' ') return -1;
    ++p;
    uint64_t value = 0;
    int negative = 0;
    if (p < end && *p == '-') { negative = 1; ++p; }
    if (p >= end || *p < '0' || *p > '9') return -1;
    while (p < end && *p >= '0' && *p <= '9') value = value * 10u + (uint64_t)(*p++ - '0');
    if (field == 5) *pgid = negative ? -(long)value : (long)value;
    if (field == 22) *start = value;
  }
  return 0;
}

static int proc_stat_read(pid_t pid, char *state, long *pgid, uint64_t *start) {
  char path[32];
  char buffer[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buffer, sizeof buffer);
  close(fd);
  if (n <= 0) return -1;
  return stat_parse(buffer, (size_t)n, state, pgid, start);
}

static int pidfd_alive(int fd) {
  struct pollfd entry = {.fd = fd, .events = POLLIN};
  return poll(&entry, 1, 0) == 0;
}

static int op_null(int signo) {
  (void)signo;
  return (int)syscall(SYS_getppid); /* not cached by glibc: a real kernel entry */
}

static int op_kill0(int signo) {
  (void)signo;
  return kill(target, 0);
}

/* (a) pidfd_open, /proc/<pid>/stat read + parse, start ticks + pgid check, poll, group signal, close. */
static int op_proc(int signo) {
  int fd = (int)syscall(SYS_pidfd_open, target, 0u);
  if (fd < 0) die("pidfd_open");
  char state;
  long pgid;
  uint64_t start;
  if (proc_stat_read(target, &state, &pgid, &start) != 0) die("stat");
  if (state == 'Z' || state == 'X' || start != expected_start_ticks || pgid != target) die("identity");
  if (!pidfd_alive(fd)) die("poll");
  int rc = (int)syscall(SYS_pidfd_send_signal, fd, signo, NULL, PIDFD_SIGNAL_PROCESS_GROUP);
  if (rc != 0) die("pidfd_send_signal");
  close(fd);
  return rc;
}

/* (b) pidfd_open, fstat inode check, getpgid, poll, group signal, close. */
static int op_pidfs(int signo) {
  int fd = (int)syscall(SYS_pidfd_open, target, 0u);
  if (fd < 0) die("pidfd_open");
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != expected_ino) die("fstat");
  if (getpgid(target) != target) die("getpgid");
  if (!pidfd_alive(fd)) die("poll");
  int rc = (int)syscall(SYS_pidfd_send_signal, fd, signo, NULL, PIDFD_SIGNAL_PROCESS_GROUP);
  if (rc != 0) die("pidfd_send_signal");
  close(fd);
  return rc;
}

static void run_row(const char *name, int (*op)(int), int signo, int samples, int batch) {
  volatile int sink = 0;
  for (int i = 0; i < WARMUP_OPS; ++i) sink += op(signo);
  printf("%s", name);
  for (int s = 0; s < samples; ++s) {
    int64_t t0 = now_ns();
    for (int i = 0; i < batch; ++i) sink += op(signo);
    int64_t t1 = now_ns();
    printf(" %.1f", (double)(t1 - t0) / batch);
  }
  printf("\n");
  (void)sink;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: signal-floor <pid> <samples> <batch> <signo>...\n");
    return 2;
  }
  target = (pid_t)atoi(argv[1]);
  int samples = atoi(argv[2]);
  int batch = atoi(argv[3]);
  /* The identity is taken once, outside the timed loops, as the JS side captures it once. */
  char state;
  long pgid;
  if (proc_stat_read(target, &state, &pgid, &expected_start_ticks) != 0) die("initial stat");
  int fd = (int)syscall(SYS_pidfd_open, target, 0u);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("initial pidfd");
  expected_ino = (uint64_t)st.st_ino;
  close(fd);

  run_row("null", op_null, 0, samples, batch);
  run_row("kill0", op_kill0, 0, samples, batch);
  for (int a = 4; a < argc; ++a) {
    int signo = atoi(argv[a]);
    char name[32];
    snprintf(name, sizeof name, "proc:%d", signo);
    run_row(name, op_proc, signo, samples, batch);
    snprintf(name, sizeof name, "pidfs:%d", signo);
    run_row(name, op_pidfs, signo, samples, batch);
  }
  return 0;
}
