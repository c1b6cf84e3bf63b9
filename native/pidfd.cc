// The proof-then-signal sequence (the kernel ABI it speaks: pidfd_abi.h).
#include "pidfd.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <poll.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <utility>

#include "pidfd_abi.h"
#include "proc_stat.h"

namespace pidfence {
namespace {

Result result_of(Outcome outcome) { return Result{outcome, Mismatch::none, SignalMode::none, 0}; }
Result failed_with(int error) { return Result{Outcome::failed, Mismatch::none, SignalMode::none, error}; }
Result mismatch_of(Mismatch why) {
  return Result{Outcome::identity_mismatch, why, SignalMode::none, 0};
}

Capabilities capabilities_probe() {
  Capabilities caps{};
  const UniquePidfd owned(sys_pidfd_open(getpid()));
  const int fd = owned.get();
  if (fd < 0) return caps;  // ENOSYS (before 5.3) or a seccomp refusal: no pidfd at all
  caps.pidfd_open = true;
  caps.pidfd_send_signal = sys_pidfd_send_signal(fd, 0, 0) == 0 || errno != ENOSYS;
  // Signal 0 to our own group is a permission check only. An unknown flag is EINVAL;
  // ESRCH (we are not a group leader) still means the kernel understood the flag.
  caps.process_group_flag =
      sys_pidfd_send_signal(fd, 0, PIDFD_SIGNAL_PROCESS_GROUP) == 0 || errno != EINVAL;
  PidfdInfo info{};
  info.mask = kPidfdInfoPid;
  caps.pidfd_get_info = ioctl(fd, kPidfdGetInfo, &info) == 0;
  struct statfs fs {};
  caps.pidfs_identity =
      fstatfs(fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == PIDFS_MAGIC;
  return caps;
}

Result pidfd_unreaped(int fd) {
  bool exited = false;
  const int error = pidfd_poll_exited(fd, &exited);
  if (error != 0) return failed_with(error);
  return exited ? result_of(Outcome::already_exited) : result_of(Outcome::verified);
}

// The closing step of every proof, shared by capture, open and the group fallback: whatever
// was read about the PID belonged to the pidfd's process if that process is still unreaped now,
// because its PID could not have been reused while we read. A failed proof passes through.
Result proof_confirmed(int fd, const Result& verdict) {
  return verdict.outcome == Outcome::verified ? pidfd_unreaped(fd) : verdict;
}

// /proc/<pid>/stat of a process that has not exited: `verified` with *stat filled, or why not.
Result unreaped_stat(pid_t pid, ProcStat* stat) {
  int error = 0;
  switch (proc_stat_read(pid, stat, &error)) {
    case ProcStatRead::gone:
      return result_of(Outcome::already_exited);
    case ProcStatRead::failed:
      return failed_with(error);
    case ProcStatRead::ok:
      break;
  }
  if (stat->state == 'Z' || stat->state == 'X') return result_of(Outcome::already_exited);
  return result_of(Outcome::verified);
}

// pidfs path: the inode names the process itself; the group leadership still needs the PID.
Result inode_proof(int fd, const Expected& expected, bool require_group_leader) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return failed_with(errno);
  if (static_cast<uint64_t>(st.st_ino) != expected.pidfs_ino) return mismatch_of(Mismatch::pidfs_ino);
  if (!require_group_leader) return result_of(Outcome::verified);
  const pid_t pgid = getpgid(expected.pid);
  if (pgid < 0) return errno == ESRCH ? result_of(Outcome::already_exited) : failed_with(errno);
  return pgid == expected.pid ? result_of(Outcome::verified) : mismatch_of(Mismatch::not_group_leader);
}

// Kernels without pidfs: boot id, PID and start ticks from /proc.
Result start_ticks_proof(const Expected& expected, bool require_group_leader) {
  ProcStat stat{};
  const Result verdict = unreaped_stat(expected.pid, &stat);
  if (verdict.outcome != Outcome::verified) return verdict;
  if (stat.start_ticks != expected.start_ticks) return mismatch_of(Mismatch::start_ticks);
  if (require_group_leader && stat.pgid != expected.pid) return mismatch_of(Mismatch::not_group_leader);
  return verdict;
}

}  // namespace

const Capabilities& capabilities_get() {
  static const Capabilities caps = capabilities_probe();
  return caps;
}

Result pidfd_open_verified(const Expected& expected, bool require_group_leader, UniquePidfd* owned) {
  // Boot id first: a handle from another boot must not touch whatever holds that PID now.
  int error = 0;
  const char* boot_id = boot_id_get(&error);
  if (boot_id == nullptr) return failed_with(error);
  if (std::memcmp(boot_id, expected.boot_id, kBootIdLength) != 0) return mismatch_of(Mismatch::boot_id);

  const Capabilities& caps = capabilities_get();
  if (!caps.pidfd_open) return result_of(Outcome::unsupported);
  if (expected.has_pidfs_ino && !caps.pidfs_identity) return result_of(Outcome::unsupported);
  // This boot's kernel gives every process an inode, and identity_capture always records it:
  // a handle of this boot without one was not captured here, or was stripped. Start ticks
  // cannot tell apart two processes born in the same tick, so the weaker proof is refused.
  if (!expected.has_pidfs_ino && caps.pidfs_identity) return mismatch_of(Mismatch::pidfs_ino);

  // The pidfd is opened before anything is read: from here on it pins one process, and
  // every later read is checked against it.
  UniquePidfd fd(sys_pidfd_open(expected.pid));
  if (!fd.valid()) return errno == ESRCH ? result_of(Outcome::already_exited) : failed_with(errno);

  Result verdict = expected.has_pidfs_ino ? inode_proof(fd.get(), expected, require_group_leader)
                                          : start_ticks_proof(expected, require_group_leader);
  verdict = proof_confirmed(fd.get(), verdict);
  if (verdict.outcome == Outcome::verified) *owned = std::move(fd);
  return verdict;
}

Result signal_verified(const Expected& expected, int signo, bool group, GroupFallback fallback) {
  const Capabilities& caps = capabilities_get();
  if (!caps.pidfd_send_signal) return result_of(Outcome::unsupported);
  UniquePidfd fd;
  const Result verdict = pidfd_open_verified(expected, group, &fd);
  if (verdict.outcome != Outcome::verified) return verdict;

  int rc;
  SignalMode mode;
  if (!group) {
    mode = SignalMode::pidfd;
    rc = sys_pidfd_send_signal(fd.get(), signo, 0);
  } else if (caps.process_group_flag && fallback != GroupFallback::forced) {
    mode = SignalMode::pidfd_process_group;
    rc = sys_pidfd_send_signal(fd.get(), signo, PIDFD_SIGNAL_PROCESS_GROUP);
  } else {
    // Kernels 5.3-6.8 have no group flag. The one allowed fallback: the verified pidfd is
    // still held and the leader is re-confirmed unreaped immediately before kill(-pgid),
    // so the group id still names the leader's live group. Reported as its own mode.
    mode = SignalMode::pgid_after_pidfd_check;
    const Result still = proof_confirmed(fd.get(), result_of(Outcome::verified));
    if (still.outcome != Outcome::verified) return still;
    rc = kill(-expected.pid, signo);
  }
  if (rc != 0) return errno == ESRCH ? result_of(Outcome::already_exited) : failed_with(errno);
  return Result{Outcome::signalled, Mismatch::none, mode, 0};
}

Result pidfd_group_signal_held(int fd, int signo) {
  if (!capabilities_get().process_group_flag) return result_of(Outcome::unsupported);
  if (sys_pidfd_send_signal(fd, signo, PIDFD_SIGNAL_PROCESS_GROUP) != 0) {
    return errno == ESRCH ? result_of(Outcome::already_exited) : failed_with(errno);
  }
  return Result{Outcome::signalled, Mismatch::none, SignalMode::pidfd_process_group, 0};
}

Result identity_capture(pid_t pid, Identity* out) {
  int error = 0;
  const char* boot_id = boot_id_get(&error);
  if (boot_id == nullptr) return failed_with(error);
  const Capabilities& caps = capabilities_get();
  if (!caps.pidfd_open) return result_of(Outcome::unsupported);

  const UniquePidfd fd(sys_pidfd_open(pid));
  if (!fd.valid()) return errno == ESRCH ? result_of(Outcome::already_exited) : failed_with(errno);

  ProcStat stat{};
  Result verdict = unreaped_stat(pid, &stat);
  struct stat st {};
  if (verdict.outcome == Outcome::verified && caps.pidfs_identity && fstat(fd.get(), &st) != 0) {
    verdict = failed_with(errno);
  }
  verdict = proof_confirmed(fd.get(), verdict);
  if (verdict.outcome != Outcome::verified) return verdict;

  out->pid = pid;
  std::memcpy(out->boot_id, boot_id, kBootIdLength + 1);
  out->start_ticks = stat.start_ticks;
  out->pgid = stat.pgid;
  out->has_pidfs_ino = caps.pidfs_identity;
  out->pidfs_ino = caps.pidfs_identity ? static_cast<uint64_t>(st.st_ino) : 0;
  return verdict;
}

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::verified: return "verified";
    case Outcome::signalled: return "signalled";
    case Outcome::already_exited: return "already_exited";
    case Outcome::identity_mismatch: return "identity_mismatch";
    case Outcome::unsupported: return "unsupported";
    case Outcome::failed: return "error";
  }
  return "error";
}

const char* mismatch_name(Mismatch mismatch) {
  switch (mismatch) {
    case Mismatch::none: return "";
    case Mismatch::boot_id: return "boot_id";
    case Mismatch::start_ticks: return "start_ticks";
    case Mismatch::pidfs_ino: return "pidfs_ino";
    case Mismatch::not_group_leader: return "not_group_leader";
  }
  return "";
}

const char* mode_name(SignalMode mode) {
  switch (mode) {
    case SignalMode::none: return "";
    case SignalMode::pidfd: return "pidfd";
    case SignalMode::pidfd_process_group: return "pidfd-process-group";
    case SignalMode::pgid_after_pidfd_check: return "pgid-after-pidfd-check";
  }
  return "";
}

}  // namespace pidfence
