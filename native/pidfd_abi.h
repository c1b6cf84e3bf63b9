// The pidfd kernel ABI this addon speaks, defined here because installed headers may predate it
// (Debian 12's describe Linux 6.1). Raw syscall(2), not glibc's pidfd_* wrappers, so the prebuilt
// binary also loads on glibc < 2.36 (routers run old distributions).
#ifndef PIDFENCE_PIDFD_ABI_H
#define PIDFENCE_PIDFD_ABI_H

#include <cerrno>
#include <cstdint>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // same number on x86_64 and arm64
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1u << 2)  // Linux 6.9
#endif
#ifndef PIDFS_MAGIC
#define PIDFS_MAGIC 0x50494446  // Linux 6.9: pidfds get their own inodes
#endif

namespace pidfence {

// struct pidfd_info as of Linux 6.13 (PIDFD_INFO_SIZE_VER0, 64 bytes).
struct PidfdInfo {
  uint64_t mask;
  uint64_t cgroupid;
  uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  int32_t exit_code;
};
static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0 is 64 bytes");
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);
constexpr uint64_t kPidfdInfoPid = 1u << 0;
constexpr uint64_t kPidfdInfoCgroupId = 1u << 2;

inline int sys_pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0u)); }

inline int sys_pidfd_send_signal(int fd, int signo, unsigned flags) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, signo, nullptr, flags));
}

// Has the pidfd's process exited (zombie or reaped)? A pidfd polls readable as soon as its thread
// group is gone. Returns 0 with *exited set, or the errno of poll.
inline int pidfd_poll_exited(int fd, bool* exited) {
  struct pollfd entry {};
  entry.fd = fd;
  entry.events = POLLIN;
  int rc;
  do {
    rc = poll(&entry, 1, 0);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return errno;
  *exited = rc != 0;
  return 0;
}

}  // namespace pidfence

#endif
