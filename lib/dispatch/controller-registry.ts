// Which controller stops a handle (design/dispatch §2.3): platform → TerminationController. The local
// controller (pidfence/process) satisfies the interface structurally; remote ones come later.
import { PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { PLATFORM_PATTERN, type TerminationOutcome, type TerminationRequest } from '../process/index';

export type { TerminationOutcome, TerminationRequest, TerminationResult } from '../process/index';

/** What the dispatcher needs from a controller; LocalProcessController is one. */
export interface TerminationController {
  /** The `platform` field of the durable handles this controller understands. */
  readonly platform: string;
  /** The longest one requestTermination call with this grace can take; a lease must outlast it. */
  boundMs(graceMs: number): number;
  /** Re-verifies the handle before every signal; never signals a bare PID (design/dispatch §2.3). */
  requestTermination(request: TerminationRequest): Promise<TerminationOutcome>;
}

/** Platform names are short lowercase words (`linux`, later e.g. `remote-worker`). */

export function validatePlatform(value: unknown): string {
  if (typeof value !== 'string')
    throw new PidfenceTypeError(
      'a controller platform must be a string such as "linux".',
      'ERR_PIDFENCE_INVALID_PLATFORM',
    );
  if (!PLATFORM_PATTERN.test(value)) {
    throw new PidfenceRangeError(
      'a controller platform must be 1 to 32 characters of a-z 0-9 - starting with a letter.',
      'ERR_PIDFENCE_INVALID_PLATFORM',
    );
  }
  return value;
}

export class ControllerRegistry {
  readonly #byPlatform = new Map<string, TerminationController>();

  constructor(controllers: readonly TerminationController[] = []) {
    for (const controller of controllers) {
      const platform = validatePlatform(controller.platform);
      if (typeof controller.boundMs !== 'function' || typeof controller.requestTermination !== 'function') {
        throw new PidfenceTypeError(
          'a controller needs boundMs(graceMs) and requestTermination(request).',
          'ERR_PIDFENCE_INVALID_CONTROLLER',
        );
      }
      if (this.#byPlatform.has(platform)) {
        throw new PidfenceRangeError(
          `two controllers for platform "${platform}"; register exactly one per platform.`,
          'ERR_PIDFENCE_DUPLICATE_CONTROLLER',
        );
      }
      this.#byPlatform.set(platform, controller);
    }
  }

  /** The controller for a handle's platform, or undefined (→ controller_missing, retried). */
  get(platform: string): TerminationController | undefined {
    return this.#byPlatform.get(platform);
  }

  /** Every registered controller, for the lease-vs-bound check. */
  all(): readonly TerminationController[] {
    return [...this.#byPlatform.values()];
  }
}
