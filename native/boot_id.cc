// Boot id, read once per process. Every JS thread calls in (the main thread and each
// worker_threads worker run entry points on their own thread), so the cache is published with
// release/acquire and filled under a lock; a failed read is not cached, the next call retries.
#include "boot_id.h"

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace pidfence {
namespace {

char cached_boot_id[kBootIdLength + 1];
std::atomic<bool> cached{false};
std::mutex fill_lock;

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

bool boot_id_is_valid(const char* text, int length) {
  if (length != kBootIdLength) return false;
  for (int i = 0; i < kBootIdLength; ++i) {
    const bool dash_position = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_position ? text[i] != '-' : !is_lower_hex(text[i])) return false;
  }
  return true;
}

namespace {

bool boot_id_fill(int* error) {
  int fd;
  do {
    fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    *error = errno;
    return false;
  }
  char buffer[64];
  ssize_t n;
  do {
    n = read(fd, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  const int read_errno = errno;
  close(fd);  // read-only fd: nothing to lose on a close error
  if (n < 0) {
    *error = read_errno;
    return false;
  }
  // The file holds the UUID followed by a newline.
  if (n < kBootIdLength || !boot_id_is_valid(buffer, kBootIdLength) ||
      (n > kBootIdLength && buffer[kBootIdLength] != '\n')) {
    *error = EPROTO;
    return false;
  }
  for (int i = 0; i < kBootIdLength; ++i) cached_boot_id[i] = buffer[i];
  cached_boot_id[kBootIdLength] = '\0';
  return true;
}

}  // namespace

const char* boot_id_get(int* error) {
  if (cached.load(std::memory_order_acquire)) return cached_boot_id;
  const std::lock_guard<std::mutex> guard(fill_lock);
  if (cached.load(std::memory_order_relaxed)) return cached_boot_id;
  if (!boot_id_fill(error)) return nullptr;
  cached.store(true, std::memory_order_release);
  return cached_boot_id;
}

}  // namespace pidfence
