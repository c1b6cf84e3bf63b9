// /proc/<pid>/stat reader and parser. `comm` may hold spaces, '(' and ')' (e.g.
// "a) b (c"), so the only safe anchor is the last ')' in the line.
#include "proc_stat.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace pidfence {
namespace {

// Field numbers as in proc(5); field 3 (state) is the first after the last ')'.
constexpr int kFieldPpid = 4;
constexpr int kFieldPgrp = 5;
constexpr int kFieldSession = 6;
constexpr int kFieldStartTime = 22;

bool is_known_state(char c) {
  // R S D Z T t W X x K P I: every letter proc(5) documents across kernel versions.
  return std::strchr("RSDZTtWXxKPI", c) != nullptr && c != '\0';
}

// Parses an optionally negative decimal integer that must end at `end` or a space.
bool parse_signed(const char** cursor, const char* end, long long* out) {
  const char* p = *cursor;
  bool negative = false;
  if (p < end && *p == '-') {
    negative = true;
    ++p;
  }
  if (p >= end || *p < '0' || *p > '9') return false;
  unsigned long long value = 0;
  int digits = 0;
  while (p < end && *p >= '0' && *p <= '9') {
    if (++digits > 19) return false;
    value = value * 10u + static_cast<unsigned>(*p - '0');
    ++p;
  }
  if (value > 9223372036854775807ull) return false;
  *out = negative ? -static_cast<long long>(value) : static_cast<long long>(value);
  *cursor = p;
  return true;
}

bool parse_unsigned64(const char** cursor, const char* end, uint64_t* out) {
  const char* p = *cursor;
  if (p >= end || *p < '0' || *p > '9') return false;
  uint64_t value = 0;
  while (p < end && *p >= '0' && *p <= '9') {
    const uint64_t digit = static_cast<uint64_t>(*p - '0');
    if (value > (UINT64_MAX - digit) / 10u) return false;
    value = value * 10u + digit;
    ++p;
  }
  *out = value;
  *cursor = p;
  return true;
}

bool fits_pid(long long value, bool allow_zero) {
  return value <= 4194304 && (allow_zero ? value >= 0 : value >= 1);
}

const char* find_last(const char* begin, const char* end, char wanted) {
  for (const char* p = end; p > begin; --p) {
    if (p[-1] == wanted) return p - 1;
  }
  return nullptr;
}

}  // namespace

bool proc_stat_parse(const char* line, size_t length, ProcStat* out) {
  if (line == nullptr || out == nullptr || length == 0) return false;
  const char* const end = line + length;
  const char* p = line;

  long long pid = 0;
  if (!parse_signed(&p, end, &pid) || !fits_pid(pid, false)) return false;
  if (end - p < 2 || p[0] != ' ' || p[1] != '(') return false;
  const char* const comm_begin = p + 2;

  const char* const close = find_last(comm_begin, end, ')');
  if (close == nullptr) return false;
  p = close + 1;
  if (end - p < 3 || p[0] != ' ' || !is_known_state(p[1])) return false;
  const char state = p[1];
  p += 2;

  long long ppid = 0, pgrp = 0, session = 0;
  uint64_t start_ticks = 0;
  for (int field = 4; field <= kFieldStartTime; ++field) {
    if (p >= end || *p != ' ') return false;
    ++p;
    if (field == kFieldStartTime) {
      if (!parse_unsigned64(&p, end, &start_ticks)) return false;
      break;
    }
    long long value = 0;
    if (!parse_signed(&p, end, &value)) return false;
    if (field == kFieldPpid) ppid = value;
    if (field == kFieldPgrp) pgrp = value;
    if (field == kFieldSession) session = value;
  }
  // The kernel always writes more fields after starttime; a line that stops here was cut.
  if (p >= end || *p != ' ') return false;
  // ppid, pgrp and session are 0 for the idle task's children and kernel threads. A dead task
  // being released by its reaper (state Z or X) has left its group and session: the kernel prints
  // -1 for both, and the reader answers `gone` for it (docs/decisions/0436).
  const bool released = (state == 'Z' || state == 'X') && pgrp == -1 && session == -1;
  if (!fits_pid(ppid, true) || (!released && (!fits_pid(pgrp, true) || !fits_pid(session, true)))) return false;

  out->pid = static_cast<pid_t>(pid);
  out->state = state;
  out->ppid = static_cast<pid_t>(ppid);
  out->pgid = static_cast<pid_t>(pgrp);
  out->sid = static_cast<pid_t>(session);
  out->start_ticks = start_ticks;
  return true;
}

ProcStatRead proc_stat_read(pid_t pid, ProcStat* out, int* error) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd;
  do {
    fd = open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOENT || errno == ESRCH) return ProcStatRead::gone;
    *error = errno;
    return ProcStatRead::failed;
  }
  char buffer[kProcStatBufferSize];
  ssize_t n;
  do {
    n = read(fd, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  const int read_errno = errno;
  close(fd);  // read-only fd: a close error cannot lose data, and the fd is released regardless
  if (n < 0) {
    if (read_errno == ESRCH) return ProcStatRead::gone;
    *error = read_errno;
    return ProcStatRead::failed;
  }
  if (n == 0) return ProcStatRead::gone;
  if (static_cast<size_t>(n) >= sizeof buffer) {
    *error = EOVERFLOW;
    return ProcStatRead::failed;
  }
  if (!proc_stat_parse(buffer, static_cast<size_t>(n), out) || out->pid != pid) {
    *error = EPROTO;
    return ProcStatRead::failed;
  }
  // Dead and being reaped right now: no group, no session, nothing to prove or signal.
  if (out->state == 'X' || out->pgid == -1) return ProcStatRead::gone;
  return ProcStatRead::ok;
}

}  // namespace pidfence
