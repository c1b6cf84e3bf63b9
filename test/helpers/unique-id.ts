// Ids that never collide across tests, files and processes sharing one store.
import { randomUUID } from 'node:crypto';

export function uniqueId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}
