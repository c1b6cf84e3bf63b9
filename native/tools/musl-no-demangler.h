// Force-included (-include) only by the musl builds in build-prebuilds.sh (docs/decisions/0081).
// libc++abi, linked in statically there, prints an uncaught exception's type from its default
// terminate handler through __cxa_demangle, which keeps the whole Itanium demangler (about 77 kB of
// code plus its relocations) in each musl prebuild. This definition is in the addon's objects, so
// the linker never takes libc++abi's from the archive. It demangles nothing, which the handler takes
// as "print the mangled name" (what libc++abi's own LIBCXXABI_NON_DEMANGLING_TERMINATE does). The
// addon is built with -fno-exceptions: only an exception thrown inside libc++ (std::bad_alloc, ...)
// reaches that handler, and it aborts either way. Weak and hidden: each translation unit carries a
// copy, the linker keeps one, and none is exported.
#ifndef PIDFENCE_MUSL_NO_DEMANGLER_H
#define PIDFENCE_MUSL_NO_DEMANGLER_H
#ifdef __cplusplus
#include <cstddef>

extern "C" __attribute__((weak, visibility("hidden"))) char* __cxa_demangle(const char*, char*, std::size_t*,
                                                                            int* status) {
  if (status != nullptr) *status = -2;  // "not a valid mangled name"
  return nullptr;
}
#endif
#endif
