// Limits and formats that more than one layer checks, each defined once (issue 14 item 4).

/** PID_MAX_LIMIT on 64-bit Linux: no PID can be larger (also the stores' CHECK constraint). */
export const PID_MAX = 4_194_304;
/**
 * A canonical v1 durable handle is under 200 bytes; the stores' column CHECK allows 1024 so a
 * future handle version fits without a migration, but no parser accepts more than this.
 */
export const HANDLE_MAX_BYTES = 256;
/** A 32-byte random capability (lease token, receipt token) as unpadded base64url: 43 characters. */
export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** A signal name as Node reports it (SIGTERM, SIGRTMIN+1). */
export const SIGNAL_NAME_PATTERN = /^SIG[A-Z0-9+-]{1,12}$/;
