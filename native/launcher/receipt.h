// The completion receipt v2 (design/execution §2, docs/decisions/0153): written once per attempt,
// tmp → fsync → rename → fsync(dir), retried with backoff while the disk is full.
#ifndef PIDFENCE_LAUNCHER_RECEIPT_H
#define PIDFENCE_LAUNCHER_RECEIPT_H

#include <stdint.h>

#include "order.h"

struct job_end {
  int exit_code;   /* -1 when ended by a signal */
  int signal;      /* 0 when it exited */
  int spawn_failed;
  int64_t started_at_ms;
  int64_t finished_at_ms;
  int64_t started_boot_ms;
  int64_t finished_boot_ms;
  uint32_t leftovers;
};

/* Wall clock (for people) and CLOCK_BOOTTIME (for the time checks), both in ms. */
int64_t wall_ms(void);
int64_t boot_ms(void);

/*
 * Writes the receipt. Returns 0 when it is durable; -1 (after a message on stderr) when it would
 * exceed RECEIPT_MAX_BYTES or the receipt directory no longer exists. Every other failure (a full
 * disk, a read-only remount, a permission) is retried with backoff until it passes, and no temp
 * file is left between tries.
 */
int receipt_write(const struct launch_order *order, const struct job_end *end);

#endif
