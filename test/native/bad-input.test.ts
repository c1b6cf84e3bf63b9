// Every bad-input class gets a typed error with a stable code, and no native call is made
// (so no syscall): the raw addon's functions are wrapped with call counters, still real.
import test from 'ava';

import { PidfenceRangeError, PidfenceTypeError } from '../../lib/base/errors';
import { readProcessStat, captureIdentity, signalVerified, waitExit, bootId } from '../../lib/native/index';
import { getAddon } from '../../lib/native/loader';

const nativeCalls: string[] = [];
const addon = getAddon();
if (addon) {
  for (const name of Object.keys(addon) as Array<keyof typeof addon>) {
    const original = addon[name] as (...args: unknown[]) => unknown;
    (addon as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      nativeCalls.push(name);
      return original(...args);
    };
  }
}

const valid = { pid: 1, bootId: '', startTicks: '1', pidfsIno: '1' };
test.before(() => {
  valid.bootId = bootId();
  nativeCalls.length = 0;
});

const badPids: Array<[string, unknown, string]> = [
  ['a string', '1', 'TypeError'],
  ['a float', 1.5, 'RangeError'],
  ['zero', 0, 'RangeError'],
  ['negative', -1, 'RangeError'],
  ['above PID_MAX', 4_194_305, 'RangeError'],
  ['NaN', Number.NaN, 'RangeError'],
  ['a bigint', 1n, 'TypeError'],
];

for (const [what, pid, kind] of badPids) {
  test.serial(`readProcessStat and captureIdentity reject a pid that is ${what}`, (t) => {
    for (const call of [() => readProcessStat(pid as number), () => captureIdentity(pid as number)]) {
      const error = t.throws(call, { instanceOf: kind === 'TypeError' ? PidfenceTypeError : PidfenceRangeError });
      t.is(error?.code, 'ERR_PIDFENCE_INVALID_PID');
    }
    t.deepEqual(nativeCalls, []);
  });
}

const badIdentities: Array<[string, () => unknown, string]> = [
  ['null', () => null, 'ERR_PIDFENCE_INVALID_IDENTITY'],
  ['an array', () => [], 'ERR_PIDFENCE_INVALID_IDENTITY'],
  ['an unknown key', () => ({ ...valid, command: 'sleep' }), 'ERR_PIDFENCE_INVALID_IDENTITY'],
  ['a missing pid', () => ({ bootId: valid.bootId, startTicks: '1' }), 'ERR_PIDFENCE_INVALID_PID'],
  ['pid out of range', () => ({ ...valid, pid: 5_000_000 }), 'ERR_PIDFENCE_INVALID_PID'],
  ['an uppercase boot id', () => ({ ...valid, bootId: valid.bootId.toUpperCase() }), 'ERR_PIDFENCE_INVALID_BOOT_ID'],
  ['a short boot id', () => ({ ...valid, bootId: valid.bootId.slice(1) }), 'ERR_PIDFENCE_INVALID_BOOT_ID'],
  ['a numeric boot id', () => ({ ...valid, bootId: 7 }), 'ERR_PIDFENCE_INVALID_BOOT_ID'],
  ['start ticks as a number', () => ({ ...valid, startTicks: 12 }), 'ERR_PIDFENCE_INVALID_START_TICKS'],
  ['start ticks with a leading zero', () => ({ ...valid, startTicks: '012' }), 'ERR_PIDFENCE_INVALID_START_TICKS'],
  ['start ticks of 21 digits', () => ({ ...valid, startTicks: '1'.repeat(21) }), 'ERR_PIDFENCE_INVALID_START_TICKS'],
  [
    'start ticks above 2^64-1',
    () => ({ ...valid, startTicks: '18446744073709551616' }),
    'ERR_PIDFENCE_INVALID_START_TICKS',
  ],
  ['negative start ticks', () => ({ ...valid, startTicks: '-1' }), 'ERR_PIDFENCE_INVALID_START_TICKS'],
  ['a non-decimal pidfs inode', () => ({ ...valid, pidfsIno: '0x10' }), 'ERR_PIDFENCE_INVALID_PIDFS_INO'],
  ['a pgid that is not a pid', () => ({ ...valid, pgid: -3 }), 'ERR_PIDFENCE_INVALID_PID'],
];

for (const [what, make, code] of badIdentities) {
  test.serial(`signalVerified and waitExit answer invalid for an identity with ${what}`, async (t) => {
    const outcome = signalVerified(make() as never, 'SIGKILL', { group: true });
    t.is(outcome.kind, 'invalid');
    t.is(outcome.kind === 'invalid' ? outcome.code : '', code);
    const waited = await waitExit(make() as never, 10);
    t.is(waited.kind, 'invalid');
    t.deepEqual(nativeCalls, []);
  });
}

const badArguments: Array<[string, () => unknown, typeof PidfenceTypeError | typeof PidfenceRangeError, string]> = [
  ['an unknown signal name', () => signalVerified(valid, 'SIGNOPE'), PidfenceRangeError, 'ERR_PIDFENCE_INVALID_SIGNAL'],
  ['a signal number out of range', () => signalVerified(valid, 99), PidfenceRangeError, 'ERR_PIDFENCE_INVALID_SIGNAL'],
  [
    'a signal of the wrong type',
    () => signalVerified(valid, true as never),
    PidfenceTypeError,
    'ERR_PIDFENCE_INVALID_SIGNAL',
  ],
  [
    'an unknown option',
    () => signalVerified(valid, 0, { grup: true } as never),
    PidfenceTypeError,
    'ERR_PIDFENCE_INVALID_OPTIONS',
  ],
  [
    'a non-boolean option',
    () => signalVerified(valid, 0, { group: 'yes' } as never),
    PidfenceTypeError,
    'ERR_PIDFENCE_INVALID_OPTIONS',
  ],
  ['a negative timeout', () => waitExit(valid, -1), PidfenceRangeError, 'ERR_PIDFENCE_INVALID_TIMEOUT'],
  ['a fractional timeout', () => waitExit(valid, 1.5), PidfenceRangeError, 'ERR_PIDFENCE_INVALID_TIMEOUT'],
  ['a timeout beyond setTimeout', () => waitExit(valid, 2 ** 31), PidfenceRangeError, 'ERR_PIDFENCE_INVALID_TIMEOUT'],
  [
    'a timeout of the wrong type',
    () => waitExit(valid, '5' as never),
    PidfenceTypeError,
    'ERR_PIDFENCE_INVALID_TIMEOUT',
  ],
];

for (const [what, call, errorClass, code] of badArguments) {
  test.serial(`${what} throws ${errorClass.name} ${code}`, (t) => {
    const error = t.throws(call, { instanceOf: errorClass });
    t.is(error?.code, code);
    t.regex(error?.message ?? '', /must|unknown|known/, 'the message says what is expected');
    t.deepEqual(nativeCalls, []);
  });
}

test.serial('the counters are live: a valid call does reach the addon', (t) => {
  readProcessStat(1); // init: not our own PID, which qemu-user fakes
  t.deepEqual(nativeCalls.splice(0), ['readProcessStat']);
});

test.serial(
  'a frozen identity is validated too (then remembered): a bad frozen one answers invalid every time',
  (t) => {
    const bad = Object.freeze({ ...valid, startTicks: '012' });
    for (let i = 0; i < 2; i++) {
      const outcome = signalVerified(bad as never, 0);
      t.is(outcome.kind, 'invalid');
      t.is(outcome.kind === 'invalid' ? outcome.code : '', 'ERR_PIDFENCE_INVALID_START_TICKS');
    }
    t.deepEqual(nativeCalls, []);
  },
);
