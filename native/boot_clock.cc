// CLOCK_BOOTTIME read (docs/decisions/0160): one clock_gettime, no cache (the vDSO makes it cheap).
#include "boot_clock.h"

#include <cerrno>
#include <ctime>

namespace pidfence {

bool boot_clock_ms(int64_t* out, int* error) {
  struct timespec now {};
  if (clock_gettime(CLOCK_BOOTTIME, &now) != 0) {
    *error = errno;
    return false;
  }
  *out = static_cast<int64_t>(now.tv_sec) * 1000 + static_cast<int64_t>(now.tv_nsec) / 1000000;
  return true;
}

}  // namespace pidfence
