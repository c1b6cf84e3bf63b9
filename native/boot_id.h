// The kernel's boot id: identity facts (PIDs, start ticks) only mean something within one boot.
#ifndef PIDFENCE_BOOT_ID_H
#define PIDFENCE_BOOT_ID_H

namespace pidfence {

constexpr int kBootIdLength = 36;

// Reads /proc/sys/kernel/random/boot_id once per process and caches it (it cannot change
// while this process lives). Returns nullptr and sets *error on failure (EPROTO when the
// file does not hold a lowercase UUID).
const char* boot_id_get(int* error);

bool boot_id_is_valid(const char* text, int length);

}  // namespace pidfence

#endif
