// Boot id, read once. The main thread is the only caller (all addon entry points run on
// the JS thread), so the cache needs no lock.
#include "boot_id.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace pidfence {
namespace {

char cached_boot_id[kBootIdLength + 1];
bool cached = false;

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

const char* boot_id_get(int* error) {
  if (cached) return cached_boot_id;
  int fd;
  do {
    fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    *error = errno;
    return nullptr;
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
    return nullptr;
  }
  // The file holds the UUID followed by a newline.
  if (n < kBootIdLength || !boot_id_is_valid(buffer, kBootIdLength) ||
      (n > kBootIdLength && buffer[kBootIdLength] != '\n')) {
    *error = EPROTO;
    return nullptr;
  }
  for (int i = 0; i < kBootIdLength; ++i) cached_boot_id[i] = buffer[i];
  cached_boot_id[kBootIdLength] = '\0';
  cached = true;
  return cached_boot_id;
}

}  // namespace pidfence
