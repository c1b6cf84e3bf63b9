// A job's cgroup (docs/decisions/0180). Raw syscalls and *at() calls relative to descriptors that
// were proved to be the cgroup with the expected id; no path is trusted twice.
#include "job_cgroup.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "pidfd_abi.h"

namespace pidfence {
namespace {

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

// Where each job cgroup was last found, by id (docs/decisions/0420). A scan reads one directory
// entry per sibling, and a runner looks at each of its jobs every cycle, so a subtree shared by
// thousands of jobs made every look cost thousands of entries. A remembered name is only a guess:
// the directory under it must have the id as its inode, the same proof a scan's find gets. A removed
// cgroup's name is kept: it answers `gone` at once (child_name_of). 1,024 sets of 4 slots chosen by a
// hash of the id, the oldest of a full set replaced, names on the heap (an allocation that fails only
// leaves the name unremembered). Guarded: the addon may serve several threads.
class CgroupNameCache {
 public:
  // Copies the name `id` was last found under into `name`; false when none is remembered.
  bool recall(uint64_t id, char* name, size_t size) {
    const std::lock_guard<std::mutex> guard(lock_);
    const Slot* slot = find(id);
    if (slot == nullptr || std::strlen(slot->name) >= size) return false;
    std::snprintf(name, size, "%s", slot->name);
    return true;
  }

  void remember(uint64_t id, const char* name) {
    char* copy = strdup(name);
    if (copy == nullptr) return;
    const std::lock_guard<std::mutex> guard(lock_);
    Slot* slot = find(id);
    if (slot == nullptr) slot = free_or_oldest(id);
    std::free(slot->name);
    *slot = Slot{id, copy};
  }

 private:
  static constexpr size_t kSetBits = 10;
  static constexpr size_t kWays = 4;
  struct Slot {
    uint64_t id = 0;
    char* name = nullptr;
  };
  struct Set {
    Slot slots[kWays];
    uint8_t next = 0;  // the way replaced next when all are taken
  };

  // Fibonacci hashing: cgroup ids are sequential inode numbers, spread over the sets by the top bits.
  Set& set_of(uint64_t id) { return sets_[(id * 0x9E3779B97F4A7C15ull) >> (64 - kSetBits)]; }

  Slot* find(uint64_t id) {
    for (Slot& slot : set_of(id).slots)
      if (slot.name != nullptr && slot.id == id) return &slot;
    return nullptr;
  }

  Slot* free_or_oldest(uint64_t id) {
    Set& set = set_of(id);
    for (Slot& slot : set.slots)
      if (slot.name == nullptr) return &slot;
    Slot* oldest = &set.slots[set.next];
    set.next = static_cast<uint8_t>((set.next + 1) % kWays);
    return oldest;
  }

  std::mutex lock_;
  Set sets_[size_t{1} << kSetBits];
};

CgroupNameCache cgroup_names;

// The name of `parent`'s child whose inode is `id`. cgroup v2 has no rename (the kernel answers
// EPERM), so a cgroup keeps the name it was found under until it is removed: when the remembered name
// no longer names a directory with this id (absent, or another one made under it), that cgroup is
// gone, and a listing would find nothing either. Without a remembered name, or when the name cannot
// be looked at (an errno but ENOENT), the subtree is listed and what it finds remembered.
CgroupResult child_name_of(int parent, uint64_t id, char* name, size_t size) {
  if (cgroup_names.recall(id, name, size)) {
    struct stat st {};
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      return result_of(S_ISDIR(st.st_mode) && static_cast<uint64_t>(st.st_ino) == id ? CgroupOutcome::ok
                                                                                        : CgroupOutcome::gone);
    if (errno == ENOENT) return result_of(CgroupOutcome::gone);
  }
  const CgroupResult found = child_named_by_id(parent, id, name, size);
  if (found.outcome == CgroupOutcome::ok) cgroup_names.remember(id, name);
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

// ENOTTY / EINVAL: a kernel before 6.13. ENOSYS: an emulator that does not pass the ioctl on
// (qemu-user) or a seccomp filter. Each means: no PIDFD_GET_INFO here, prove another way.
bool info_unavailable(int error) { return error == ENOTTY || error == EINVAL || error == ENOSYS; }

// Is `pidfd`'s process in cgroup `id`? The kernel answers from the pidfd itself (Linux 6.13).
CgroupResult member_proved_by_info(int pidfd, uint64_t id, bool* member) {
  PidfdInfo info{};
  info.mask = kPidfdInfoCgroupId;
  if (ioctl(pidfd, kPidfdGetInfo, &info) != 0) {
    if (errno == ESRCH) {  // reaped meanwhile: not a member any more
      *member = false;
      return result_of(CgroupOutcome::ok);
    }
    return info_unavailable(errno) ? result_of(CgroupOutcome::unsupported) : failed_with(errno);
  }
  *member = (info.mask & kPidfdInfoCgroupId) != 0 && info.cgroupid == id;
  return result_of(CgroupOutcome::ok);
}

// Calls visit(pid) for each PID in `dir`'s cgroup.procs, read from its start, until visit answers
// anything but ok. A number may straddle two reads: `pid` carries the digits so far.
template <typename Visit>
CgroupResult procs_each(int dir, Visit visit) {
  UniquePidfd fd(openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_result(errno);
  char chunk[4096];
  pid_t pid = 0;
  for (;;) {
    const ssize_t got = read(fd.get(), chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_result(errno);
    for (ssize_t i = 0; i < got; ++i) {
      if (chunk[i] >= '0' && chunk[i] <= '9') {
        pid = pid * 10 + (chunk[i] - '0');
        continue;
      }
      if (pid > 0) {
        const CgroupResult step = visit(pid);
        if (step.outcome != CgroupOutcome::ok) return step;
      }
      pid = 0;
    }
    if (got == 0) break;
  }
  return pid > 0 ? visit(pid) : result_of(CgroupOutcome::ok);
}

// Members waiting for the listing proof: their PIDs and pidfds, opened before the listing is read
// again. A batch bounds both the descriptors held and the re-reads (one per batch).
constexpr size_t kListingBatch = 64;

struct MemberSignal {
  int dir;
  uint64_t id;
  int signo;
  CgroupProof proof;  // the strong proof until it answers unsupported, then listing
  uint32_t signalled;
  pid_t pids[kListingBatch];
  UniquePidfd pidfds[kListingBatch];
  bool listed[kListingBatch];
  size_t pending;
};

CgroupResult signal_proved(MemberSignal* call, int pidfd) {
  if (sys_pidfd_send_signal(pidfd, call->signo, 0) != 0) {
    return errno == ESRCH ? result_of(CgroupOutcome::ok) : failed_with(errno);
  }
  ++call->signalled;
  return result_of(CgroupOutcome::ok);
}

// The proof where PIDFD_GET_INFO is missing: a pending PID is listed in cgroup.procs read after its
// pidfd was opened, and the pidfd's process has still not exited after that read. A PID is not
// reused before its process is reaped, so the PID listed was this process's: it was a member.
CgroupResult pending_signalled(MemberSignal* call) {
  for (size_t i = 0; i < call->pending; ++i) call->listed[i] = false;
  const CgroupResult read = procs_each(call->dir, [call](pid_t listed_pid) {
    for (size_t i = 0; i < call->pending; ++i) call->listed[i] = call->listed[i] || call->pids[i] == listed_pid;
    return result_of(CgroupOutcome::ok);
  });
  CgroupResult result = read;
  for (size_t i = 0; i < call->pending && result.outcome == CgroupOutcome::ok; ++i) {
    bool exited = true;
    const int error = pidfd_poll_exited(call->pidfds[i].get(), &exited);
    if (error != 0) result = failed_with(error);
    else if (call->listed[i] && !exited) result = signal_proved(call, call->pidfds[i].get());
  }
  for (size_t i = 0; i < call->pending; ++i) call->pidfds[i].reset();
  call->pending = 0;
  return result;
}

CgroupResult member_seen(MemberSignal* call, pid_t pid) {
  UniquePidfd pidfd(sys_pidfd_open(pid));
  if (!pidfd.valid()) return errno == ESRCH ? result_of(CgroupOutcome::ok) : failed_with(errno);
  if (call->proof == CgroupProof::pidfd_info) {
    bool member = false;
    const CgroupResult proof = member_proved_by_info(pidfd.get(), call->id, &member);
    if (proof.outcome == CgroupOutcome::ok) return member ? signal_proved(call, pidfd.get()) : proof;
    if (proof.outcome != CgroupOutcome::unsupported) return proof;
    call->proof = CgroupProof::listing;
  }
  call->pids[call->pending] = pid;
  call->pidfds[call->pending] = std::move(pidfd);
  ++call->pending;
  return call->pending == kListingBatch ? pending_signalled(call) : result_of(CgroupOutcome::ok);
}

}  // namespace

CgroupResult job_cgroup_open(const char* subtree, uint64_t id, UniquePidfd* out) {
  UniquePidfd parent;
  CgroupResult step = open_subtree(subtree, &parent);
  if (step.outcome != CgroupOutcome::ok) return step;
  char name[256];
  step = child_name_of(parent.get(), id, name, sizeof name);
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

CgroupResult job_cgroup_signal_members(int dir, uint64_t id, int signo, CgroupProof* proof, uint32_t* signalled) {
  MemberSignal call{};
  call.dir = dir;
  call.id = id;
  call.signo = signo;
  call.proof = *proof;
  CgroupResult result = procs_each(dir, [&call](pid_t pid) { return member_seen(&call, pid); });
  if (result.outcome == CgroupOutcome::ok && call.pending > 0) result = pending_signalled(&call);
  *proof = call.proof;
  *signalled = call.signalled;
  return result;
}

CgroupResult job_cgroup_remove(const char* subtree, uint64_t id) {
  UniquePidfd parent;
  CgroupResult step = open_subtree(subtree, &parent);
  if (step.outcome != CgroupOutcome::ok) return step;
  char name[256];
  step = child_name_of(parent.get(), id, name, sizeof name);
  if (step.outcome != CgroupOutcome::ok) return step;
  if (unlinkat(parent.get(), name, AT_REMOVEDIR) == 0) return result_of(CgroupOutcome::ok);
  if (errno == EBUSY || errno == ENOTEMPTY) return result_of(CgroupOutcome::busy);
  return errno_result(errno);
}

CgroupResult job_cgroup_learn_name(const char* subtree, uint64_t id, const char* name) {
  UniquePidfd parent;
  const CgroupResult step = open_subtree(subtree, &parent);
  if (step.outcome != CgroupOutcome::ok) return step;
  struct stat st {};
  if (fstatat(parent.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno_result(errno);
  // Proved as a recalled name is: a wrong name remembered would answer `gone` for a live cgroup.
  if (!S_ISDIR(st.st_mode) || static_cast<uint64_t>(st.st_ino) != id) return result_of(CgroupOutcome::gone);
  cgroup_names.remember(id, name);
  return result_of(CgroupOutcome::ok);
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
