// Lease tokens and their digest (design/dispatch §2.2 step 6, design/postgres §D4): the raw token is a one-time
// write capability returned only by a successful claim; stores keep only the domain-separated digest.
import { createHash, randomBytes } from 'node:crypto';

import { TOKEN_BYTES, TOKEN_DIGEST_DOMAIN } from './limits';

/** A fresh lease token from the CSPRNG: 32 bytes, base64url (43 characters). */
export function createLeaseToken(): string {
  return randomBytes(TOKEN_BYTES).toString('base64url');
}

/** SHA-256(`pidfence.cancellation-dispatch-lease.v1\0` ‖ token), lowercase hex. */
export function leaseTokenDigest(token: string): string {
  return createHash('sha256').update(TOKEN_DIGEST_DOMAIN, 'utf8').update(token, 'utf8').digest('hex');
}
