// Limits and formats that more than one layer checks, each defined once (issue 14 item 4).

/** PID_MAX_LIMIT on 64-bit Linux: no PID can be larger (also the stores' CHECK constraint). */
export const PID_MAX = 4_194_304;
/**
 * A canonical v1 durable handle is under 200 bytes; a v2 handle of a contained job also names its
 * cgroup's subtree (docs/decisions/0304), up to CGROUP_SUBTREE_HANDLE_MAX_BYTES. The stores' column
 * CHECK allows exactly this, so no migration was needed.
 */
export const HANDLE_MAX_BYTES = 1024;
/**
 * The longest cgroup subtree a handle can name (docs/decisions/0304): with the largest of every
 * other field, the handle still fits HANDLE_MAX_BYTES. Printable ASCII without `"` or `\`, so its
 * JSON form has exactly these bytes.
 */
export const CGROUP_SUBTREE_HANDLE_MAX_BYTES = 640;
export const CGROUP_SUBTREE_HANDLE_PATTERN = /^\/[\x20-\x21\x23-\x5b\x5d-\x7e]*$/;
/** A 32-byte random capability (lease token, receipt token) as unpadded base64url: 43 characters. */
export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** A signal name as Node reports it (SIGTERM, SIGRTMIN+1). */
export const SIGNAL_NAME_PATTERN = /^SIG[A-Z0-9+-]{1,12}$/;
