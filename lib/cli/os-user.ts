// Who runs this command, as the OS authenticated them (docs/decisions/0044): the user name of the
// process's uid, or `uid-N` when the uid has no passwd entry (common in containers) or a name
// pidfence cannot use as a subject.
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
