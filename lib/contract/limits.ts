// Hard limits of the cancellation dispatch contract (design/dispatch §2.2, §2.5, §2.6; design/postgres §D2).
// Each limit is a named constant next to its reason; validators and stores read only these.

/**
 * Shortest lease a claim may ask for. Small on purpose: the shared contract suite runs against
 * PostgreSQL with real sleeps, and a 50 ms lease lets it prove expiry quickly. A production caller
 * uses far longer leases (the controller's TERM/KILL window must fit inside, design/dispatch §2.5).
 */
export const LEASE_DURATION_MIN_MS = 50;
/** Longest lease: a crashed worker blocks takeover for at most this long (fixed upper bound, design/dispatch §2.5). */
export const LEASE_DURATION_MAX_MS = 10 * 60 * 1000;

/** Shortest retry delay a result may carry; small for the same reason as the lease minimum. */
export const RETRY_DELAY_MIN_MS = 10;
/** Longest retry delay: a transient failure never parks a cancellation for more than an hour. */
export const RETRY_DELAY_MAX_MS = 60 * 60 * 1000;

/** Backoff `min(max, base * 2^(dispatch_count - 1))` (design/dispatch §2.6): first retry after 1 s ... */
export const BACKOFF_BASE_MS = 1_000;
/** ... never more than 5 minutes between attempts. */
export const BACKOFF_MAX_MS = 5 * 60 * 1000;
/** 2^20 * base already exceeds any allowed max; capping keeps the arithmetic exact and finite. */
export const BACKOFF_MAX_EXPONENT = 20;

/** Run, attempt, project and event ids: short printable keys (they appear in indexes and events). */
export const ID_MAX_LENGTH = 128;
/** Lease owner ids (a replica's stable id or `host:pid`); never exposed outside the store. */
export const OWNER_MAX_LENGTH = 128;

/** Raw lease token: 32 CSPRNG bytes, base64url without padding (43 characters). */
export const TOKEN_BYTES = 32;
export const TOKEN_LENGTH = 43;
/** Domain separation for the stored digest (design/architecture §6): a digest of anything else never matches. */
export const TOKEN_DIGEST_DOMAIN = 'pidfence.cancellation-dispatch-lease.v1\0';

/** Due page size (design/dispatch §2.6): default 32, hard maximum 64 items per query. */
export const DUE_PAGE_DEFAULT = 32;
export const DUE_PAGE_MAX = 64;
/** Pages per supervisor cycle: default 4, hard maximum 64 (the supervisor enforces it). */
export const PAGES_PER_CYCLE_DEFAULT = 4;
export const PAGES_PER_CYCLE_MAX = 64;
/** Blocked drill-down page size (design/dispatch §5), fixed. */
export const BLOCKED_PAGE_SIZE = 16;

/**
 * Epoch milliseconds accepted anywhere in the contract: 0 up to year 275760 (the Date range), so
 * every value stays an exact integer in both a JS number and a PostgreSQL bigint.
 */
export const EPOCH_MS_MAX = 8_640_000_000_000_000;
/** Counters (version, dispatch count) stay exact JS integers. */
export const COUNTER_MAX = Number.MAX_SAFE_INTEGER;
