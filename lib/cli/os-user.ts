// Who runs this command, as the OS authenticated them (docs/decisions/0044): the user name of the
// process's uid, or `uid-N` when the uid has no passwd entry (common in containers) or a name
// pidfence cannot use as a subject.
import { statSync } from 'node:fs';
import { userInfo } from 'node:os';

import { validateSubject } from '../contract/index';

function userName(): string | undefined {
  try {
    return validateSubject(userInfo().username);
  } catch {
    // No passwd entry (userInfo throws) or a name outside the subject alphabet: the uid stands in.
    return undefined;
  }
}

export function osPrincipal(): string {
  return userName() ?? `uid-${process.getuid?.() ?? 0}`;
}

/**
 * The subject who holds every grant on a SQLite store (docs/decisions/0170): this command's own OS
 * user when its uid owns the file (or the file is not there yet, so this command would create it);
 * undefined when another user owns it, who then needs grants like anyone else.
 */
export function storeOwnerSubject(file: string): string | undefined {
  let ownerUid: number;
  try {
    ownerUid = statSync(file).uid;
  } catch {
    return osPrincipal();
  }
  return ownerUid === process.getuid?.() ? osPrincipal() : undefined;
}
