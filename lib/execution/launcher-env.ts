// The environment variable that carries the receipt token to the launcher (never argv, never the job).
export const RECEIPT_TOKEN_ENV = 'PIDFENCE_RECEIPT_TOKEN';
