// /proc/<pid>/stat: one read() into a fixed buffer, parsed from the LAST ')'.
// design/dispatch §2.3 (start ticks and process-group leadership are identity facts).
#ifndef PIDFENCE_PROC_STAT_H
#define PIDFENCE_PROC_STAT_H

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace pidfence {

struct ProcStat {
  pid_t pid;
  char state;
  pid_t ppid;
  pid_t pgid;
  pid_t sid;
  uint64_t start_ticks;  // field 22, clock ticks since boot; kept exact
};

// Large enough for any real stat line (~350 bytes); a full buffer means truncation
// and is refused rather than parsed.
constexpr size_t kProcStatBufferSize = 4096;

// Parses one stat line. Returns false for anything malformed: no ") ", an unknown
// state letter, a non-numeric or overflowing field, fewer than 22 fields, a negative group
// or session (allowed as -1 for both only in state Z or X, a task being released).
bool proc_stat_parse(const char* line, size_t length, ProcStat* out);

enum class ProcStatRead { ok, gone, failed };

// One open + one read + close. `gone` when the process does not exist (ENOENT, ESRCH,
// an empty read because it was reaped in between, or a task being reaped now: state X, or group -1). On `failed`, *error is the errno
// (EOVERFLOW for a line that filled the buffer, EPROTO for an unparsable line).
ProcStatRead proc_stat_read(pid_t pid, ProcStat* out, int* error);

}  // namespace pidfence

#endif
