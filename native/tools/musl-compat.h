// Force-included (-include) only by the musl builds in build-prebuilds.sh (docs/decisions/0081):
// musl has no strerrorname_np (a glibc 2.32 extension), which the addon uses to report an errno by
// name. Names the errnos the addon's syscalls can return; any other answers null, which the addon
// reports as EUNKNOWN, as it does on glibc for an unnamed value.
#ifndef PIDFENCE_MUSL_COMPAT_H
#define PIDFENCE_MUSL_COMPAT_H
#include <errno.h>

static inline const char* strerrorname_np(int error) {
  switch (error) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case E2BIG: return "E2BIG";
    case EBADF: return "EBADF";
    case ECHILD: return "ECHILD";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case ENODEV: return "ENODEV";
    case ENOTDIR: return "ENOTDIR";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case ENOTTY: return "ENOTTY";
    case ENOSPC: return "ENOSPC";
    case ERANGE: return "ERANGE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOSYS: return "ENOSYS";
    case ELOOP: return "ELOOP";
    case EOVERFLOW: return "EOVERFLOW";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return nullptr;
  }
}
#endif
