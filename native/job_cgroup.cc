// A job's cgroup (docs/decisions/0180). Raw syscalls and *at() calls relative to descriptors that
// were proved to be the cgroup with the expected id; no path is trusted twice.
#include "job_cgroup.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace pidfence {
namespace {

// struct pidfd_info, PIDFD_INFO_SIZE_VER0 (Linux 6.13); the installed headers predate it.
struct PidfdInfo {
  uint64_t mask;
  uint64_t cgroupid;
  uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  int32_t exit_code;
};
static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0 is 64 bytes");
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);
constexpr uint64_t kPidfdInfoCgroupId = 1u << 2;

CgroupResult result_of(CgroupOutcome outcome) { return CgroupResult{outcome, 0}; }
CgroupResult failed_with(int error) { return CgroupResult{CgroupOutcome::failed, error}; }
// A cgroup removed while we were at it: the directory's files answer ENOENT or ENODEV.
CgroupResult errno_result(int error) {
  return error == ENOENT || error == ENODEV ? result_of(CgroupOutcome::gone) : failed_with(error);
}

// Finds the child of `parent` whose inode is `id` (kernfs gives d_ino = the cgroup id) and copies
// its name. Returns ok, gone or failed.
CgroupResult child_named_by_id(int parent, uint64_t id, char* name, size_t size) {
  const int scan = fcntl(parent, F_DUPFD_CLOEXEC, 0);
  if (scan < 0) return failed_with(errno);
  DIR* dir = fdopendir(scan);
  if (dir == nullptr) {
    const int error = errno;
    (void)close(scan);  // a directory descriptor: nothing to flush
    return failed_with(error);
  }
  CgroupResult found = result_of(CgroupOutcome::gone);
  errno = 0;
  for (struct dirent* entry = readdir(dir); entry != nullptr; entry = readdir(dir)) {
    if (entry->d_type != DT_DIR || static_cast<uint64_t>(entry->d_ino) != id) continue;
    if (std::strlen(entry->d_name) >= size) break;
    std::snprintf(name, size, "%s", entry->d_name);
    found = result_of(CgroupOutcome::ok);
    break;
  }
  if (found.outcome == CgroupOutcome::gone && errno != 0) found = failed_with(errno);
  (void)closedir(dir);  // read-only
  return found;
}

CgroupResult open_subtree(const char* subtree, UniquePidfd* out) {
  UniquePidfd fd(open(subtree, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT ? result_of(CgroupOutcome::gone) : failed_with(errno);
  *out = std::move(fd);
  return result_of(CgroupOutcome::ok);
}

CgroupResult write_file(int dir, const char* file, const char* text) {
  UniquePidfd fd(openat(dir, file, O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT ? result_of(CgroupOutcome::unsupported) : failed_with(errno);
  const size_t length = std::strlen(text);
  ssize_t written;
  do {
    written = write(fd.get(), text, length);
  } while (written < 0 && errno == EINTR);
  if (written < 0) return errno_result(errno);
  return result_of(CgroupOutcome::ok);
}

// Is `pidfd`'s process in cgroup `id`? The kernel answers from the pidfd itself.
CgroupResult member_proved(int pidfd, uint64_t id, bool* member) {
  PidfdInfo info{};
  info.mask = kPidfdInfoCgroupId;
  if (ioctl(pidfd, kPidfdGetInfo, &info) != 0) {
    if (errno == ESRCH) {  // reaped meanwhile: not a member any more
      *member = false;
      return result_of(CgroupOutcome::ok);
    }
    return errno == ENOTTY || errno == EINVAL ? result_of(CgroupOutcome::unsupported) : failed_with(errno);
  }
  *member = (info.mask & kPidfdInfoCgroupId) != 0 && info.cgroupid == id;
  return result_of(CgroupOutcome::ok);
}

CgroupResult signal_member(pid_t pid, uint64_t id, int signo, uint32_t* signalled) {
  UniquePidfd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0u)));
  if (!pidfd.valid()) return errno == ESRCH ? result_of(CgroupOutcome::ok) : failed_with(errno);
  bool member = false;
  const CgroupResult proof = member_proved(pidfd.get(), id, &member);
  if (proof.outcome != CgroupOutcome::ok || !member) return proof;
  if (syscall(SYS_pidfd_send_signal, pidfd.get(), signo, nullptr, 0u) != 0) {
    return errno == ESRCH ? result_of(CgroupOutcome::ok) : failed_with(errno);
  }
  ++*signalled;
  return result_of(CgroupOutcome::ok);
}

}  // namespace

CgroupResult job_cgroup_open(const char* subtree, uint64_t id, UniquePidfd* out) {
  UniquePidfd parent;
  CgroupResult step = open_subtree(subtree, &parent);
  if (step.outcome != CgroupOutcome::ok) return step;
  char name[256];
  step = child_named_by_id(parent.get(), id, name, sizeof name);
  if (step.outcome != CgroupOutcome::ok) return step;
  UniquePidfd dir(openat(parent.get(), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dir.valid()) return errno_result(errno);
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return failed_with(errno);
  // Renamed and another created under the name between readdir and open: not ours.
  if (static_cast<uint64_t>(st.st_ino) != id) return result_of(CgroupOutcome::gone);
  *out = std::move(dir);
  return result_of(CgroupOutcome::ok);
}

CgroupResult job_cgroup_events(int dir, CgroupEvents* out) {
  UniquePidfd fd(openat(dir, "cgroup.events", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_result(errno);
  char text[256];
  ssize_t got;
  do {
    got = pread(fd.get(), text, sizeof text - 1, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return errno_result(errno);
  text[got] = '\0';
  const char* populated = std::strstr(text, "populated ");
  if (populated == nullptr) return failed_with(EPROTO);
  out->populated = populated[10] == '1';
  const char* frozen = std::strstr(text, "frozen ");
  out->frozen = frozen != nullptr && frozen[7] == '1';
  return result_of(CgroupOutcome::ok);
}

CgroupResult job_cgroup_freeze(int dir, bool frozen) { return write_file(dir, "cgroup.freeze", frozen ? "1" : "0"); }

CgroupResult job_cgroup_kill(int dir) { return write_file(dir, "cgroup.kill", "1"); }

CgroupResult job_cgroup_signal_members(int dir, uint64_t id, int signo, uint32_t* signalled) {
  *signalled = 0;
  UniquePidfd fd(openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_result(errno);
  char chunk[4096];
  pid_t pid = 0;
  for (;;) {
    const ssize_t got = read(fd.get(), chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_result(errno);
    // A number may straddle two reads: `pid` carries the digits so far.
    for (ssize_t i = 0; i < got; ++i) {
      if (chunk[i] >= '0' && chunk[i] <= '9') {
        pid = pid * 10 + (chunk[i] - '0');
        continue;
      }
      if (pid > 0) {
        const CgroupResult step = signal_member(pid, id, signo, signalled);
        if (step.outcome != CgroupOutcome::ok) return step;
      }
      pid = 0;
    }
    if (got == 0) break;
  }
  if (pid > 0) return signal_member(pid, id, signo, signalled);
  return result_of(CgroupOutcome::ok);
}

CgroupResult job_cgroup_remove(const char* subtree, uint64_t id) {
  UniquePidfd parent;
  CgroupResult step = open_subtree(subtree, &parent);
  if (step.outcome != CgroupOutcome::ok) return step;
  char name[256];
  step = child_named_by_id(parent.get(), id, name, sizeof name);
  if (step.outcome != CgroupOutcome::ok) return step;
  if (unlinkat(parent.get(), name, AT_REMOVEDIR) == 0) return result_of(CgroupOutcome::ok);
  if (errno == EBUSY || errno == ENOTEMPTY) return result_of(CgroupOutcome::busy);
  return errno_result(errno);
}

CgroupResult job_cgroup_watch_events(int dir, UniquePidfd* out) {
  UniquePidfd fd(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid()) return failed_with(errno);
  // Through the proved descriptor, so the watch is on this cgroup's file whatever its name now.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d/cgroup.events", dir);
  if (inotify_add_watch(fd.get(), path, IN_MODIFY) < 0) return errno_result(errno);
  *out = std::move(fd);
  return result_of(CgroupOutcome::ok);
}

const char* cgroup_outcome_name(CgroupOutcome outcome) {
  switch (outcome) {
    case CgroupOutcome::ok: return "ok";
    case CgroupOutcome::gone: return "gone";
    case CgroupOutcome::busy: return "busy";
    case CgroupOutcome::unsupported: return "unsupported";
    case CgroupOutcome::failed: return "error";
  }
  return "error";
}

}  // namespace pidfence
