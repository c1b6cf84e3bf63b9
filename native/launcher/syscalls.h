// Syscall numbers the launcher uses that older C libraries' headers lack (the same on x86_64 and
// arm64), in one place for leftovers.c and cgroup.c.
#ifndef PIDFENCE_LAUNCHER_SYSCALLS_H
#define PIDFENCE_LAUNCHER_SYSCALLS_H

#include <sys/syscall.h>

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif

#endif
