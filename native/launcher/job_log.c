// The job's log (docs/decisions/0250). One thread copies the job's streams into the log file and to
// the tee fds; the launcher's main thread (wait, leftovers, receipt) is unchanged. Nothing here
// ever makes the job wait on the disk: output the file cannot take is dropped, counted, and marked
// in the log once it can take output again.
#define _GNU_SOURCE
#include "job_log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "receipt.h"

/* One read takes what a full pipe holds; a smaller cap reads at most half of it, so a rotated file is
 * always at least half full. Static: the copy thread's stack stays small, its pages untouched until used. */
#define CHUNK_BYTES 65536
/* Capture fds live at or above this, clear of the stdio fds and of the order's fd 3. */
#define FD_FLOOR 10
#define FINISH_QUIET_MS 100
#define FINISH_MAX_MS 2000
/* How often a log file that could not be opened is tried again. */
#define REOPEN_EVERY_MS 1000
#define NAME_BYTES (ORDER_MAX_ID_BYTES + 8)
#define ROTATED_NAME_BYTES (NAME_BYTES + 12) /* ".<u32>" */

struct stream {
  int fd;     /* the launcher's end: a pipe's read end or a pty master; -1 once closed */
  int job_fd; /* the job's end until the job started; -1 after */
  int tee_fd; /* 1 or 2 (the launcher's own), or -1 */
  int pty;
};

static struct {
  int on;
  const char *directory;
  char name[NAME_BYTES];
  uint64_t max_bytes;
  uint32_t keep;
  int dir_fd;
  int file_fd;
  uint64_t size;
  uint64_t dropped;
  int drop_errno;
  int64_t reopen_at_ms;
  int warned;
  /* stderr writes to the stdout pty: both are the same terminal, and their order stays exact. */
  int shared_pty;
  struct stream streams[2];
  int wake_fd;
  pthread_t thread;
} state = { .dir_fd = -1, .file_fd = -1, .wake_fd = -1, .streams = { { -1, -1, -1, 0 }, { -1, -1, -1, 0 } } };

/* Closes a descriptor this file owns; nothing is buffered in user space, so a close error loses nothing. */
static void close_fd(int *fd) {
  if (*fd >= 0) (void)close(*fd);
  *fd = -1;
}

/* Moves `fd` to FD_FLOOR or above (close-on-exec); -1 when it cannot (EMFILE), `fd` closed either way. */
static int above_floor(int fd) {
  if (fd < 0) return -1;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, FD_FLOOR);
  (void)close(fd); /* the original of a fresh pipe/pty/file: nothing written through it yet */
  return moved;
}

static void warn_once(const char *what, int error) {
  if (state.warned) return;
  state.warned = 1;
  fprintf(stderr, "pidfence launcher: the job's log %s (%s); the job runs on, and the log says what was lost.\n", what, strerror(error));
}

static void log_file_open(void) {
  int64_t now = boot_ms();
  if (now < state.reopen_at_ms) return;
  state.reopen_at_ms = now + REOPEN_EVERY_MS;
  if (state.dir_fd < 0) state.dir_fd = above_floor(open(state.directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  int fd = state.dir_fd < 0 ? -1 : openat(state.dir_fd, state.name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    state.drop_errno = errno;
    warn_once("cannot be opened", errno);
    return;
  }
  struct stat info;
  state.size = fstat(fd, &info) == 0 ? (uint64_t)info.st_size : 0; /* fstat of an open file: EOVERFLOW only on 32-bit */
  state.file_fd = above_floor(fd);
}

/* Writes as much as the file takes; returns how much, errno set when short. */
static size_t write_some(int fd, const char *bytes, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, bytes + done, size - done);
    if (n > 0) done += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else {
      if (n == 0) errno = ENOSPC; /* a regular file writes 0 only when it can take nothing */
      break;
    }
  }
  return done;
}

static void rotated_name(char *out, uint32_t n) { snprintf(out, ROTATED_NAME_BYTES, "%s.%u", state.name, n); }

/* <run>.log.(n-1) → .n down to .1, the current file → .1 (or gone when keep is 0), then a new file. */
static void log_file_rotate(void) {
  close_fd(&state.file_fd);
  char from[ROTATED_NAME_BYTES], to[ROTATED_NAME_BYTES];
  int failed = 0;
  for (uint32_t n = state.keep; n >= 2; n--) {
    rotated_name(from, n - 1);
    rotated_name(to, n);
    if (renameat(state.dir_fd, from, state.dir_fd, to) != 0 && errno != ENOENT) failed = errno;
  }
  rotated_name(to, 1);
  int gone = state.keep >= 1 ? renameat(state.dir_fd, state.name, state.dir_fd, to) : unlinkat(state.dir_fd, state.name, 0);
  if (gone != 0 && errno != ENOENT) failed = errno;
  state.reopen_at_ms = 0;
  log_file_open();
  /* The current file could not be moved away: empty it, so the cap still holds. */
  if (failed != 0 && state.file_fd >= 0 && state.size > 0 && ftruncate(state.file_fd, 0) == 0) state.size = 0;
  if (failed != 0) warn_once("cannot be rotated", failed);
}

/* Room for `size` more bytes under the cap, rotating first when the file holds anything. */
static int log_room(size_t size) {
  if (state.file_fd >= 0 && state.size > 0 && state.size + size > state.max_bytes) log_file_rotate();
  return state.file_fd >= 0 && state.size + size <= state.max_bytes;
}

/* A short write: the rest is dropped; an error other than a full disk closes the file (tried again later). */
static void log_write_failed(int error) {
  state.drop_errno = error;
  if (error != ENOSPC && error != EDQUOT && error != EFBIG) close_fd(&state.file_fd);
}

/* Says in the log how much was dropped before what follows; stays owed until it fits. */
static void log_mark_dropped(void) {
  char marker[192];
  int n = snprintf(marker, sizeof(marker), "\n[pidfence: %llu bytes of the job's output were dropped here: %s]\n",
      (unsigned long long)state.dropped, strerror(state.drop_errno));
  if (n <= 0 || (size_t)n >= sizeof(marker) || !log_room((size_t)n)) return;
  size_t written = write_some(state.file_fd, marker, (size_t)n);
  state.size += written;
  if (written == (size_t)n) state.dropped = 0;
  else log_write_failed(errno);
}

/* Appends a chunk; what the file cannot take now is counted as dropped, never waited for. */
static void log_append(const char *bytes, size_t size) {
  if (state.file_fd < 0) log_file_open();
  if (state.dropped > 0 && state.file_fd >= 0) log_mark_dropped();
  if (state.dropped == 0 && log_room(size)) {
    size_t written = write_some(state.file_fd, bytes, size);
    state.size += written;
    if (written == size) return;
    log_write_failed(errno);
    size -= written;
  } else if (state.file_fd >= 0 && state.dropped == 0) {
    state.drop_errno = EFBIG; /* the cap holds even when rotation failed */
  }
  state.dropped += size;
  warn_once("cannot take the job's output now", state.drop_errno);
}

/* Closes a stream: its writers then get EPIPE (a pipe) or EIO (a pty) on their next write. */
static void stream_close(struct stream *s) {
  close_fd(&s->fd);
  s->tee_fd = -1;
}

/*
 * Copies a chunk to the launcher's own fd, blocking as the job's write to it would have. A reader
 * that went away (EPIPE) closes the stream, so the job sees it as without pidfence; a terminal
 * that hung up (EIO) or any other error only ends the copy there. The log already has the chunk.
 */
static void tee_copy(struct stream *s, const char *bytes, size_t size) {
  while (s->tee_fd >= 0 && size > 0) {
    ssize_t n = write(s->tee_fd, bytes, size);
    if (n > 0) {
      bytes += n;
      size -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      struct pollfd writable = { s->tee_fd, POLLOUT, 0 };
      (void)poll(&writable, 1, -1); /* EINTR/ENOMEM: the write is simply tried again */
    } else if (n < 0 && errno == EPIPE) {
      stream_close(s);
    } else {
      s->tee_fd = -1;
    }
  }
}

static char chunk[CHUNK_BYTES];

/* Reads what a stream has; EOF, EIO (a pty whose every writer closed) or any error closes it. */
static void stream_read(struct stream *s) {
  size_t most = state.max_bytes / 2 < sizeof(chunk) ? (size_t)(state.max_bytes / 2) : sizeof(chunk);
  ssize_t n;
  do {
    n = read(s->fd, chunk, most);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    log_append(chunk, (size_t)n);
    tee_copy(s, chunk, (size_t)n);
  } else if (n == 0 || errno != EAGAIN) {
    stream_close(s);
  }
}

enum pump_until { PUMP_UNTIL_ASKED, PUMP_UNTIL_CLOSED };

/*
 * Copies until every stream closed. PUMP_UNTIL_ASKED: once the wake fd is written, only until
 * FINISH_QUIET_MS pass without output or FINISH_MAX_MS in all. Returns 1 when a stream is still open.
 */
static int pump(enum pump_until until) {
  int64_t finish_by = -1;
  for (;;) {
    struct pollfd fds[3];
    struct stream *of[3];
    nfds_t count = 0;
    for (int i = 0; i < 2; i++) {
      if (state.streams[i].fd < 0) continue;
      of[count] = &state.streams[i];
      fds[count++] = (struct pollfd){ state.streams[i].fd, POLLIN, 0 };
    }
    if (count == 0) return 0;
    int finishing = finish_by >= 0;
    if (until == PUMP_UNTIL_ASKED && !finishing) {
      of[count] = NULL;
      fds[count++] = (struct pollfd){ state.wake_fd, POLLIN, 0 };
    }
    int64_t left = finishing ? finish_by - boot_ms() : -1;
    if (finishing && left <= 0) return 1;
    int ready = poll(fds, count, finishing ? (int)(left < FINISH_QUIET_MS ? left : FINISH_QUIET_MS) : -1);
    if (ready < 0 && errno != EINTR) return 1; /* ENOMEM: give up copying rather than spin */
    if (ready == 0) return 1;                  /* quiet after the finish request */
    for (nfds_t i = 0; i < count; i++) {
      if (fds[i].revents == 0) continue;
      if (of[i] == NULL) finish_by = boot_ms() + FINISH_MAX_MS;
      else stream_read(of[i]);
    }
  }
}

static void *pump_thread(void *unused) {
  (void)unused;
  return pump(PUMP_UNTIL_ASKED) ? (void *)1 : NULL;
}

/* A pseudo-terminal for a stream whose copy goes to a terminal: the job keeps seeing a terminal
 * (line-buffered output, colours) as without pidfence. Raw mode: the bytes reach the log as written. */
static int pty_make(int tee_fd, int ends[2]) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return -1;
  char name[64];
  int slave = -1;
  if (grantpt(master) == 0 && unlockpt(master) == 0 && ptsname_r(master, name, sizeof(name)) == 0) slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) {
    (void)close(master); /* nothing written yet */
    return -1;
  }
  struct termios mode;
  if (tcgetattr(slave, &mode) == 0) {
    cfmakeraw(&mode);
    (void)tcsetattr(slave, TCSANOW, &mode); /* a fresh pty takes any mode; failing leaves \n → \r\n only */
  }
  struct winsize size;
  if (ioctl(tee_fd, TIOCGWINSZ, &size) == 0) (void)ioctl(master, TIOCSWINSZ, &size); /* the job then sees the terminal's width */
  ends[0] = master;
  ends[1] = slave;
  return 0;
}

/* The job's end and the launcher's end of one stream; without them the job inherits the launcher's fd. */
static void stream_make(struct stream *s, int tee_fd) {
  int ends[2];
  s->pty = tee_fd >= 0 && isatty(tee_fd) && pty_make(tee_fd, ends) == 0;
  if (!s->pty && pipe2(ends, O_CLOEXEC) != 0) {
    warn_once("cannot capture a stream", errno);
    return;
  }
  s->fd = above_floor(ends[0]);
  s->job_fd = above_floor(ends[1]);
  if (s->fd < 0 || s->job_fd < 0 || fcntl(s->fd, F_SETFL, O_NONBLOCK) != 0) {
    warn_once("cannot capture a stream", errno);
    close_fd(&s->fd);
    close_fd(&s->job_fd);
    return;
  }
  s->tee_fd = tee_fd;
}

/* Both fds are the same terminal device. */
static int same_terminal(int a, int b) {
  struct stat first, second;
  return isatty(a) && isatty(b) && fstat(a, &first) == 0 && fstat(b, &second) == 0 && first.st_rdev == second.st_rdev;
}

/* No capture after all (no thread): the job inherits the launcher's fds, as before job logs. */
static void capture_abandon(int error) {
  warn_once("cannot be kept", error);
  for (int i = 0; i < 2; i++) {
    close_fd(&state.streams[i].fd);
    close_fd(&state.streams[i].job_fd);
  }
  close_fd(&state.wake_fd);
  close_fd(&state.file_fd);
  close_fd(&state.dir_fd);
  state.on = 0;
}

/* The copying thread starts with every signal blocked: signals are the main thread's business. */
static int pump_thread_start(void) {
  sigset_t all, old;
  sigfillset(&all);
  int blocked = pthread_sigmask(SIG_SETMASK, &all, &old);
  int error = pthread_create(&state.thread, NULL, pump_thread, NULL);
  if (blocked == 0) (void)pthread_sigmask(SIG_SETMASK, &old, NULL); /* restoring a mask it just read */
  return error;
}

void job_log_open(const struct launch_order *order) {
  if (order->log_directory == NULL) return;
  state.on = 1;
  state.directory = order->log_directory;
  state.max_bytes = order->log_max_bytes;
  state.keep = order->log_keep;
  snprintf(state.name, sizeof(state.name), "%s.log", order->run_id); /* an id: no '/', fits (order.c) */
  /* A copy to a reader that went away must not end the launcher: EPIPE is handled in tee_copy. */
  (void)signal(SIGPIPE, SIG_IGN); /* SIG_ERR only for an invalid signal number */
  log_file_open();
  int tee_out = (order->log_tee & ORDER_LOG_TEE_STDOUT) ? 1 : -1;
  int tee_err = (order->log_tee & ORDER_LOG_TEE_STDERR) ? 2 : -1;
  stream_make(&state.streams[0], tee_out);
  state.shared_pty = state.streams[0].pty && tee_err == 2 && same_terminal(1, 2);
  if (!state.shared_pty) stream_make(&state.streams[1], tee_err);
  state.wake_fd = above_floor(eventfd(0, EFD_CLOEXEC));
  if (state.wake_fd < 0) {
    capture_abandon(errno);
    return;
  }
  int error = pump_thread_start();
  if (error != 0) capture_abandon(error);
}

void job_log_attach_child(void) {
  if (!state.on) return;
  int out = state.streams[0].job_fd;
  int err = state.shared_pty ? out : state.streams[1].job_fd;
  /* dup2 to a valid fd fails only with EINTR/EBUSY, which Linux does not give here; the job would then inherit the launcher's. */
  if (out >= 0) (void)dup2(out, STDOUT_FILENO);
  if (err >= 0) (void)dup2(err, STDERR_FILENO);
}

void job_log_started(void) {
  if (!state.on) return;
  for (int i = 0; i < 2; i++) close_fd(&state.streams[i].job_fd);
}

/* Leftovers were kept and still write: a process of its own copies on until they close. */
static void drainer_start(void) {
  pid_t pid = fork();
  if (pid == 0) {
    (void)pump(PUMP_UNTIL_CLOSED);
    if (state.dropped > 0) log_mark_dropped();
    _exit(0);
  }
  if (pid < 0) fprintf(stderr, "pidfence launcher: cannot keep copying the output of the processes left running (%s).\n", strerror(errno));
}

void job_log_finish(int keep_writers) {
  if (!state.on) return;
  uint64_t one = 1;
  /* An eventfd write fails only at a counter overflow, impossible with one write. */
  if (write(state.wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) fprintf(stderr, "pidfence launcher: cannot end the log copy (%s).\n", strerror(errno));
  void *open_left = NULL;
  if (pthread_join(state.thread, &open_left) != 0) open_left = NULL; /* EDEADLK/EINVAL: not for a thread we made */
  if (open_left != NULL && keep_writers) drainer_start();
  else if (state.dropped > 0) {
    state.reopen_at_ms = 0;
    if (state.file_fd < 0) log_file_open();
    log_mark_dropped();
  }
  for (int i = 0; i < 2; i++) close_fd(&state.streams[i].fd);
  close_fd(&state.wake_fd);
  close_fd(&state.file_fd);
  close_fd(&state.dir_fd);
  state.on = 0;
}
