// Receipt v2 writer (docs/decisions/0153). The JSON is assembled with snprintf: every string in it
// was checked against a closed character set (ids, token: order.c; boot id: here), so nothing in it
// needs escaping, and a value outside those sets is never written.
#define _GNU_SOURCE
#include "receipt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECEIPT_VERSION 2
#define RECEIPT_MAX_BYTES 2048
#define BOOT_ID_BYTES 36
#define BACKOFF_FIRST_MS 50
#define BACKOFF_MAX_MS 5000

static int64_t clock_ms(clockid_t clock) {
  struct timespec now;
  if (clock_gettime(clock, &now) != 0) return 0; /* cannot fail for these clocks on Linux */
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int64_t wall_ms(void) { return clock_ms(CLOCK_REALTIME); }
int64_t boot_ms(void) { return clock_ms(CLOCK_BOOTTIME); }

/* The boot id as the kernel prints it (8-4-4-4-12 lowercase hex), or 0 when unreadable. */
static int read_boot_id(char out[BOOT_ID_BYTES + 1]) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got;
  do {
    got = read(fd, out, BOOT_ID_BYTES);
  } while (got < 0 && errno == EINTR);
  (void)close(fd); /* read-only */
  if (got != BOOT_ID_BYTES) return 0;
  out[BOOT_ID_BYTES] = '\0';
  for (int i = 0; i < BOOT_ID_BYTES; i++) {
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    char ch = out[i];
    if (dash ? ch != '-' : !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
  }
  return 1;
}

/* The names Node gives (os.constants.signals); a real-time signal as SIGRTMIN+n. */
static const char *const SIGNAL_NAMES[] = {
  NULL, "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL",
  "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT",
  "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF",
  "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS",
};

static void signal_json(int signal, char *out, size_t size) {
  if (signal <= 0) snprintf(out, size, "null");
  else if ((size_t)signal < sizeof(SIGNAL_NAMES) / sizeof(SIGNAL_NAMES[0])) snprintf(out, size, "\"%s\"", SIGNAL_NAMES[signal]);
  else snprintf(out, size, "\"SIGRTMIN+%d\"", signal - SIGRTMIN);
}

static int receipt_json(const struct launch_order *order, const struct job_end *end, char *out, size_t size) {
  char boot_id[BOOT_ID_BYTES + 3];
  char id[BOOT_ID_BYTES + 1];
  if (read_boot_id(id)) snprintf(boot_id, sizeof(boot_id), "\"%s\"", id);
  else snprintf(boot_id, sizeof(boot_id), "null");
  char exit_code[16];
  if (end->exit_code < 0) snprintf(exit_code, sizeof(exit_code), "null");
  else snprintf(exit_code, sizeof(exit_code), "%d", end->exit_code);
  char signal[32];
  signal_json(end->exit_code < 0 ? end->signal : 0, signal, sizeof(signal));
  int n = snprintf(out, size,
      "{\"v\":%d,\"runId\":\"%s\",\"attemptId\":\"%s\",\"seq\":%u,\"token\":\"%s\",\"exitCode\":%s,\"signal\":%s,"
      "\"spawnFailed\":%s,\"startedAtMs\":%lld,\"finishedAtMs\":%lld,\"bootId\":%s,\"startedBootMs\":%lld,"
      "\"finishedBootMs\":%lld,\"leftovers\":%u}",
      RECEIPT_VERSION, order->run_id, order->attempt_id, order->seq, order->token, exit_code, signal,
      end->spawn_failed ? "true" : "false", (long long)end->started_at_ms, (long long)end->finished_at_ms, boot_id,
      (long long)end->started_boot_ms, (long long)end->finished_boot_ms, end->leftovers);
  return n > 0 && (size_t)n < size ? n : -1;
}

static int write_all(int fd, const char *bytes, size_t size) {
  while (size > 0) {
    ssize_t done = write(fd, bytes, size);
    if (done < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    bytes += done;
    size -= (size_t)done;
  }
  return 0;
}

/* One try: 0 when durable, else -1 with errno set. The temp file never outlives a failed try. */
static int try_write(int dir, const char *temp, const char *final, const char *json, size_t size) {
  if (unlinkat(dir, temp, 0) != 0 && errno != ENOENT) return -1; /* a launcher that died mid-write left it */
  int fd = openat(dir, temp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  int failed = write_all(fd, json, size) != 0 || fsync(fd) != 0;
  int saved = errno;
  if (close(fd) != 0 && !failed) {
    failed = 1;
    saved = errno;
  }
  if (!failed && renameat(dir, temp, dir, final) != 0) {
    failed = 1;
    saved = errno;
  }
  if (failed) {
    unlinkat(dir, temp, 0); /* best effort: ENOENT after a rename that half-happened is fine */
    errno = saved;
    return -1;
  }
  /* Renamed: a failed directory fsync is retried by rewriting (the content is identical). */
  return fsync(dir);
}

/* A full disk clears by itself; anything else (a read-only remount, a permission) needs a person. */
static int waiting_cures(int error) { return error == ENOSPC || error == EDQUOT || error == EIO; }

static void sleep_ms(long ms) {
  struct timespec left = { ms / 1000, (ms % 1000) * 1000000L };
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

int receipt_write(const struct launch_order *order, const struct job_end *end) {
  char json[RECEIPT_MAX_BYTES];
  int size = receipt_json(order, end, json, sizeof(json));
  char temp[ORDER_MAX_ID_BYTES + 16];
  char final[ORDER_MAX_ID_BYTES + 16];
  snprintf(temp, sizeof(temp), "%s.receipt.tmp", order->attempt_id);
  snprintf(final, sizeof(final), "%s.receipt", order->attempt_id);
  if (size < 0) {
    fprintf(stderr, "pidfence launcher: the completion receipt would exceed %d bytes; nothing was written.\n", RECEIPT_MAX_BYTES);
    return -1;
  }
  /*
   * The receipt is the only other copy of the job's exit status: giving up would turn a success
   * into `lost` (issue 28 item 3). So every failure is retried with backoff until the write lands;
   * one that waiting alone does not cure is said once, with what to do.
   */
  long backoff = BACKOFF_FIRST_MS;
  int told = 0;
  for (;;) {
    int dir = open(order->receipt_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int result = dir < 0 ? -1 : try_write(dir, temp, final, json, (size_t)size);
    int error = errno;
    if (dir >= 0) (void)close(dir); /* read-only directory fd, already fsynced */
    if (result == 0) return 0;
    if (dir < 0 && (error == ENOENT || error == ENOTDIR)) {
      /* The directory itself is gone (its store removed): nobody could ever read the receipt, and
         a launcher that waited for it would outlive everything. */
      fprintf(stderr, "pidfence launcher: the completion receipt could not be written (%s): the receipt directory is gone.\n", strerror(error));
      return -1;
    }
    if (!waiting_cures(error) && !told) {
      fprintf(stderr, "pidfence launcher: the completion receipt could not be written (%s); it is tried again until it can be: make the receipt directory writable.\n", strerror(error));
      told = 1;
    }
    sleep_ms(backoff);
    backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
  }
}
