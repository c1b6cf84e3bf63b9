// TERMs held back from children that are still copies of their parent (docs/decisions/0442).
// Everything is read from /proc by PID while a pidfd on the process is held, and trusted only if the
// pidfd still names a live (or unreaped) process after the read: then the PID was that process's
// throughout. Every signal goes through the pidfd.
#define _GNU_SOURCE
#include "held_term.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "syscalls.h"

/*
 * Less CPU time than a child spends between its fork and the end of an exec, with the faults of its
 * copied memory: a runnable child under it that catches TERM still runs its parent's handler.
 */
#define FRESH_CPU_NS 1000000ULL
/* CPU time after which a child that still runs its parent's program is that program (a subshell). */
#define OWN_PROGRAM_CPU_NS 2000000ULL

static int pidfd_signal(int pidfd, int signal) { return (int)syscall(__NR_pidfd_send_signal, pidfd, signal, NULL, 0); }

/* Reads /proc/<pid>/<name> into buf (NUL-terminated); its length, or -1. */
static ssize_t proc_read(pid_t pid, const char *name, char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got;
  do {
    got = read(fd, buf, size - 1);
  } while (got < 0 && errno == EINTR);
  (void)close(fd); /* read-only */
  if (got < 0) return -1;
  buf[got] = '\0';
  return got;
}

/* Nanoseconds the process has spent on a CPU since its fork (schedstat's first field). */
static int cpu_ns(pid_t pid, unsigned long long *out) {
  char text[128];
  if (proc_read(pid, "schedstat", text, sizeof(text)) < 0) return -1;
  return sscanf(text, "%llu", out) == 1 ? 0 : -1;
}

/* stat fields 3 (state), 26-28 (start of code, end of code, start of stack) and 34 (caught signals). */
static int image_read(pid_t pid, struct program_image *out) {
  char text[1024];
  if (proc_read(pid, "stat", text, sizeof(text)) < 0) return -1;
  const char *fields = strrchr(text, ')'); /* the command name may hold anything but ends at the last ')' */
  if (fields == NULL) return -1;
  unsigned long long value[32];
  int count = 0;
  const char *at = fields + 1;
  while (count < 32) {
    while (*at == ' ') at++;
    if (*at == '\0' || *at == '\n') break;
    if (count == 0) {
      out->runnable = *at == 'R';
      value[count++] = 0; /* field 3, the state letter */
      while (*at != ' ' && *at != '\0') at++;
      continue;
    }
    char *end;
    errno = 0;
    value[count++] = strtoull(at, &end, 10);
    if (end == at || errno != 0) return -1;
    at = end;
  }
  if (count < 32) return -1;
  /* value[i] is field i + 3 */
  out->code_start = value[23];
  out->code_end = value[24];
  out->stack_start = value[25];
  out->catches_term = (value[31] >> (SIGTERM - 1)) & 1;
  return 0;
}

static int still_named(int pidfd) { return pidfd_signal(pidfd, 0) == 0; }

int held_term_take(struct held_terms *held, int pidfd, pid_t pid) {
  if (held->count >= HELD_TERM_MAX) return 0;
  unsigned long long ran;
  struct program_image image;
  if (cpu_ns(pid, &ran) != 0 || ran >= FRESH_CPU_NS) return 0;
  if (image_read(pid, &image) != 0 || !image.catches_term || !image.runnable || !still_named(pidfd)) return 0;
  int kept = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
  if (kept < 0) return 0; /* EMFILE: the TERM goes now */
  held->items[held->count++] = (struct held_term){ kept, pid, image, ran };
  return 1;
}

int held_term_holds(const struct held_terms *held, pid_t pid) {
  for (size_t i = 0; i < held->count; i++) {
    /* still named by its pidfd: the PID was not freed and taken by another process meanwhile */
    if (held->items[i].pid == pid && still_named(held->items[i].pidfd)) return 1;
  }
  return 0;
}

static int same_image(const struct program_image *a, const struct program_image *b) {
  return a->code_start == b->code_start && a->code_end == b->code_end && a->stack_start == b->stack_start;
}

/*
 * Runs its own program, or waits for something: it no longer catches TERM, exec'd, spent a subshell's
 * CPU time since it was held, or is not runnable (a TERM wakes it, and a program held by mistake is
 * held no longer than until it waits).
 */
static int runs_own_program(const struct held_term *item) {
  unsigned long long ran;
  struct program_image now;
  if (cpu_ns(item->pid, &ran) != 0 || image_read(item->pid, &now) != 0 || !still_named(item->pidfd)) {
    return 1; /* ended or cannot be told: the TERM goes (through the pidfd, harmless to an ended one) */
  }
  return !now.catches_term || !same_image(&now, &item->image) || ran >= item->cpu_ns + OWN_PROGRAM_CPU_NS ||
         !now.runnable;
}

size_t held_terms_send_ready(struct held_terms *held) {
  size_t kept = 0;
  for (size_t i = 0; i < held->count; i++) {
    struct held_term *item = &held->items[i];
    if (!runs_own_program(item)) {
      held->items[kept++] = *item;
      continue;
    }
    if (pidfd_signal(item->pidfd, SIGTERM) == 0) (void)pidfd_signal(item->pidfd, SIGCONT); /* a stopped one would never see TERM */
    (void)close(item->pidfd); /* a pidfd: nothing to flush */
  }
  held->count = kept;
  return kept;
}

void held_terms_clear(struct held_terms *held) {
  for (size_t i = 0; i < held->count; i++) (void)close(held->items[i].pidfd); /* a pidfd: nothing to flush */
  held->count = 0;
}
