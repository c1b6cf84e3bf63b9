// pidfd: open, prove, signal; capability probes. design/dispatch §2.3: identity is re-proved
// before every signal, and the signal goes through the same kernel handle as the proof.
#ifndef PIDFENCE_PIDFD_H
#define PIDFENCE_PIDFD_H

#include <cstdint>
#include <sys/types.h>
#include <unistd.h>

#include "boot_id.h"

namespace pidfence {

struct Capabilities {
  bool pidfd_open;          // pidfd_open(2), Linux 5.3
  bool pidfd_send_signal;   // pidfd_send_signal(2), Linux 5.1
  bool process_group_flag;  // PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9
  bool pidfd_get_info;      // ioctl(PIDFD_GET_INFO), Linux 6.13
  bool pidfs_identity;      // pidfds live on pidfs (6.9): st_ino is unique per process per boot
};

// Probed once from the running kernel (EINVAL / ENOSYS / ENOTTY answers), then cached.
const Capabilities& capabilities_get();

struct Identity {
  pid_t pid;
  char boot_id[kBootIdLength + 1];
  uint64_t start_ticks;
  pid_t pgid;
  bool has_pidfs_ino;
  uint64_t pidfs_ino;
};

enum class Outcome {
  verified,  // proved and still unreaped (no signal asked for or sent yet)
  signalled,
  already_exited,
  identity_mismatch,
  unsupported,
  failed,  // an unexpected errno; see Result.error
};

enum class Mismatch { none, boot_id, start_ticks, pidfs_ino, not_group_leader };

// Which kernel path delivered (or would deliver) the signal.
enum class SignalMode { none, pidfd, pidfd_process_group, pgid_after_pidfd_check };

struct Result {
  Outcome outcome;
  Mismatch mismatch;
  SignalMode mode;
  int error;  // errno when outcome == failed
};

struct Expected {
  pid_t pid;
  const char* boot_id;  // 36 characters, validated by the caller
  uint64_t start_ticks;
  bool has_pidfs_ino;
  uint64_t pidfs_ino;
};

enum class GroupFallback { when_needed, forced };

// Sole owner of one pidfd: closes it when it goes out of scope, on every path. close(2) on
// Linux releases the descriptor even when it reports EINTR, and a pidfd has no buffered data to
// lose, so the answer of close is not needed.
class UniquePidfd {
 public:
  UniquePidfd() = default;
  explicit UniquePidfd(int fd) : fd_(fd) {}
  UniquePidfd(UniquePidfd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  UniquePidfd& operator=(UniquePidfd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  UniquePidfd(const UniquePidfd&) = delete;
  UniquePidfd& operator=(const UniquePidfd&) = delete;
  ~UniquePidfd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) (void)close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Captures the identity of a live process from one pidfd: `verified` with *out filled, or
// `already_exited` when it does not exist or has exited (a zombie has no identity worth keeping).
Result identity_capture(pid_t pid, Identity* out);

// Opens a pidfd and proves it belongs to `expected`. On `verified` (proved and still
// unreaped) *owned receives the pidfd. On a kernel with pidfs, an `expected` of this boot
// without the pidfs inode is refused (identity_mismatch, pidfs_ino): this kernel gave every
// process it captured an inode, so a handle without one is not to be trusted on the weaker
// start-ticks proof (docs/decisions/0006).
Result pidfd_open_verified(const Expected& expected, bool require_group_leader, UniquePidfd* owned);

// One call: pidfd_open, proof, signal through the same pidfd. `signo` 0 is a pure proof.
Result signal_verified(const Expected& expected, int signo, bool group, GroupFallback fallback);

// Signals the group led by the process a held, already-verified pidfd refers to, even after
// that leader exited: the pidfd pins the leader's struct pid, and the kernel resolves the group
// through it, never through a reusable number. Needs PIDFD_SIGNAL_PROCESS_GROUP (else
// `unsupported`: kill(-pgid) after the leader's exit would be a guess). ESRCH: group empty.
Result pidfd_group_signal_held(int fd, int signo);

const char* outcome_name(Outcome outcome);
const char* mismatch_name(Mismatch mismatch);
const char* mode_name(SignalMode mode);

}  // namespace pidfence

#endif
