// The launch order (docs/decisions/0150, 0180, 0250, 0441): what the launcher reads from fd 3 before it starts the
// job. Length-prefixed fields, every length bounded, parsed without a JSON library.
#ifndef PIDFENCE_LAUNCHER_ORDER_H
#define PIDFENCE_LAUNCHER_ORDER_H

#include <stddef.h>
#include <stdint.h>

/* The same limits as lib/execution/launch-order.ts, which writes the order. */
#define ORDER_MAGIC "PFO4"
#define ORDER_MAGIC_BYTES 4
#define ORDER_MAX_BYTES (4u * 1024u * 1024u)
#define ORDER_MAX_ARGS 65536u
/* The kernel's MAX_ARG_STRLEN (32 pages) counts the NUL; a longer argument cannot be exec'd. */
#define ORDER_MAX_ARG_BYTES (131072u - 1u)
#define ORDER_MAX_PATH_BYTES 4095u
#define ORDER_MAX_ID_BYTES 128u
#define ORDER_TOKEN_BYTES 43u
#define ORDER_MAX_GRACE_MS 3600000u
/* The job's log (docs/decisions/0250): bytes per file, rotated files kept, the tee bits. */
#define ORDER_LOG_MIN_BYTES 16384u
#define ORDER_LOG_MAX_BYTES (1024u * 1024u * 1024u)
#define ORDER_LOG_MAX_KEEP 20u
#define ORDER_LOG_TEE_STDOUT 1u
#define ORDER_LOG_TEE_STDERR 2u
/* How much nicer than the launcher the job may be made (docs/decisions/0441): nice(1)'s range. */
#define ORDER_MAX_NICE_INCREMENT 19u

enum leftover_policy { LEFTOVERS_STOP = 0, LEFTOVERS_KEEP = 1 };

struct launch_order {
  uint32_t seq;
  uint32_t grace_ms;
  enum leftover_policy leftovers;
  const char *receipt_directory;
  const char *run_id;
  const char *attempt_id;
  const char *token;
  /* argv[0] is the command; NULL-terminated. */
  char **argv;
  uint32_t argc;
  /* The job's own cgroup (docs/decisions/0180), created by the runner; NULL: group containment. */
  const char *cgroup_path;
  /* Where the job's output is kept (docs/decisions/0250); NULL: not captured, the job inherits fds 1 and 2. */
  const char *log_directory;
  uint32_t log_max_bytes;
  uint32_t log_keep;
  /* ORDER_LOG_TEE_*: which of the job's streams are also copied to the launcher's own fd 1 / fd 2. */
  uint32_t log_tee;
  /* How much nicer than the launcher the job runs (docs/decisions/0441); 0: the same priority. */
  uint32_t nice_increment;
};

/*
 * Parses `bytes`. Returns NULL on success, else a
 * sentence naming what was wrong. Strings are malloc.d copies; the launcher keeps them for its life (nothing to free: it execs or exits).
 */
const char *order_parse(const unsigned char *bytes, size_t size, struct launch_order *order);

#endif
