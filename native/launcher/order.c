// Parser of the launch order (docs/decisions/0150, 0180, 0250, 0441). Layout, integers little-endian u32:
//   "PFO4" seq grace_ms leftovers str(receiptDirectory) str(runId) str(attemptId) str(token)
//   argc str(command) str(arg)... str(cgroupPath) str(logDirectory) logMaxBytes logKeep logTee
//   niceIncrement;
//   str = u32 length, bytes (no NUL). Nothing may follow.
#define _GNU_SOURCE
#include "order.h"

#include <stdlib.h>
#include <string.h>

struct cursor {
  const unsigned char *at;
  size_t left;
};

static int take_u32(struct cursor *c, uint32_t *out) {
  if (c->left < 4) return -1;
  *out = (uint32_t)c->at[0] | (uint32_t)c->at[1] << 8 | (uint32_t)c->at[2] << 16 | (uint32_t)c->at[3] << 24;
  c->at += 4;
  c->left -= 4;
  return 0;
}

/* Takes one string as a fresh NUL-terminated copy (the order is read once; copies stay small). */
static char *take_string(struct cursor *c, uint32_t max) {
  uint32_t length;
  if (take_u32(c, &length) != 0 || length > max || length > c->left) return NULL;
  if (memchr(c->at, '\0', length) != NULL) return NULL;
  char *copy = malloc((size_t)length + 1);
  if (copy == NULL) return NULL;
  memcpy(copy, c->at, length);
  copy[length] = '\0';
  c->at += length;
  c->left -= length;
  return copy;
}

/* lib/contract ID_PATTERN: a letter or digit, then A-Z a-z 0-9 . _ : - */
static int is_id(const char *value) {
  size_t n = strlen(value);
  if (n == 0 || n > ORDER_MAX_ID_BYTES) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = value[i];
    int alnum = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    if (!alnum && (i == 0 || (ch != '.' && ch != '_' && ch != ':' && ch != '-'))) return 0;
  }
  return 1;
}

/* lib/base TOKEN_PATTERN: 43 characters of base64url. */
static int is_token(const char *value) {
  if (strlen(value) != ORDER_TOKEN_BYTES) return 0;
  for (const char *p = value; *p; p++) {
    char ch = *p;
    int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok) return 0;
  }
  return 1;
}

/* The job's log settings (docs/decisions/0250): an empty directory means no capture, and then all zero. */
static const char *take_log(struct cursor *c, struct launch_order *order) {
  char *directory = take_string(c, ORDER_MAX_PATH_BYTES);
  if (directory == NULL) return "its log directory is too long or cut short";
  if (take_u32(c, &order->log_max_bytes) != 0 || take_u32(c, &order->log_keep) != 0 || take_u32(c, &order->log_tee) != 0) return "its log settings are cut short";
  if (directory[0] == '\0') {
    free(directory);
    return order->log_max_bytes == 0 && order->log_keep == 0 && order->log_tee == 0 ? NULL : "it has log settings without a log directory";
  }
  if (directory[0] != '/') return "its log directory is not absolute";
  if (order->log_max_bytes < ORDER_LOG_MIN_BYTES || order->log_max_bytes > ORDER_LOG_MAX_BYTES) return "its log size is out of range";
  if (order->log_keep > ORDER_LOG_MAX_KEEP) return "its rotated log count is out of range";
  if ((order->log_tee & ~(ORDER_LOG_TEE_STDOUT | ORDER_LOG_TEE_STDERR)) != 0) return "its tee bits are unknown";
  order->log_directory = directory;
  return NULL;
}

const char *order_parse(const unsigned char *bytes, size_t size, struct launch_order *order) {
  memset(order, 0, sizeof(*order));
  if (size < ORDER_MAGIC_BYTES || memcmp(bytes, ORDER_MAGIC, ORDER_MAGIC_BYTES) != 0) return "it does not start with the order's magic";
  struct cursor c = { bytes + ORDER_MAGIC_BYTES, size - ORDER_MAGIC_BYTES };
  uint32_t leftovers;
  if (take_u32(&c, &order->seq) != 0 || take_u32(&c, &order->grace_ms) != 0 || take_u32(&c, &leftovers) != 0) return "it is cut short";
  if (order->seq < 1 || order->seq > 1000000) return "its sequence is out of range";
  if (order->grace_ms > ORDER_MAX_GRACE_MS) return "its grace is out of range";
  if (leftovers != LEFTOVERS_STOP && leftovers != LEFTOVERS_KEEP) return "its leftover policy is unknown";
  order->leftovers = (enum leftover_policy)leftovers;
  order->receipt_directory = take_string(&c, ORDER_MAX_PATH_BYTES);
  order->run_id = take_string(&c, ORDER_MAX_ID_BYTES);
  order->attempt_id = take_string(&c, ORDER_MAX_ID_BYTES);
  order->token = take_string(&c, ORDER_TOKEN_BYTES);
  if (!order->receipt_directory || !order->run_id || !order->attempt_id || !order->token) return "a field is too long or cut short";
  if (order->receipt_directory[0] != '/') return "its receipt directory is not absolute";
  if (!is_id(order->run_id) || !is_id(order->attempt_id)) return "an id has characters outside the id pattern";
  if (!is_token(order->token)) return "its token is not 43 base64url characters";
  uint32_t argc;
  if (take_u32(&c, &argc) != 0 || argc < 1 || argc > ORDER_MAX_ARGS) return "its argument count is out of range";
  char **argv = calloc((size_t)argc + 1, sizeof(char *));
  if (argv == NULL) return "there is no memory for its arguments";
  for (uint32_t i = 0; i < argc; i++) {
    argv[i] = take_string(&c, ORDER_MAX_ARG_BYTES);
    if (argv[i] == NULL || (i == 0 && argv[0][0] == '\0')) {
      free(argv);
      return "an argument is too long, empty where a command belongs, or cut short";
    }
  }
  order->argv = argv;
  order->argc = argc;
  char *cgroup_path = take_string(&c, ORDER_MAX_PATH_BYTES);
  if (cgroup_path == NULL || (cgroup_path[0] != '\0' && cgroup_path[0] != '/')) {
    free(argv);
    return "its cgroup path is too long, cut short or not absolute";
  }
  if (cgroup_path[0] == '\0') free(cgroup_path);
  else order->cgroup_path = cgroup_path;
  const char *log_problem = take_log(&c, order);
  if (log_problem != NULL) {
    free(argv);
    return log_problem;
  }
  if (take_u32(&c, &order->nice_increment) != 0 || order->nice_increment > ORDER_MAX_NICE_INCREMENT) {
    free(argv);
    return "its nice increment is cut short or out of range";
  }
  if (c.left != 0) {
    free(argv);
    return "bytes follow its nice increment";
  }
  return NULL;
}
