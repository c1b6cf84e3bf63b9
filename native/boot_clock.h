// CLOCK_BOOTTIME in whole milliseconds: the clock durations are measured on (docs/decisions/0160).
// It never steps with the wall clock and keeps counting while the machine is suspended.
#ifndef PIDFENCE_BOOT_CLOCK_H
#define PIDFENCE_BOOT_CLOCK_H

#include <cstdint>

namespace pidfence {

// Milliseconds since boot (truncated). Returns false and sets *error on failure.
bool boot_clock_ms(int64_t* out, int* error);

}  // namespace pidfence

#endif
