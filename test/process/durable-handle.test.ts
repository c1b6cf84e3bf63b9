// parseHandle / formatHandle: exact shape, canonical text, typed errors; a property test for the
// round trip and a fuzz run that must never crash or accept a non-canonical text.
import test from 'ava';
import * as fc from 'fast-check';

import { PidfenceRangeError, PidfenceTypeError } from '../../lib/base/errors';
import { CGROUP_SUBTREE_HANDLE_MAX_BYTES } from '../../lib/base/limits';
import { HANDLE_MAX_BYTES, formatHandle, parseHandle, type DurableProcessHandle } from '../../lib/process/index';

const bootIdArb = fc.uuid().map((id) => id.toLowerCase());
const decimalArb = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String);
const handleArb: fc.Arbitrary<DurableProcessHandle> = fc
  .record({
    bootId: bootIdArb,
    pid: fc.integer({ min: 1, max: 4_194_304 }),
    startTicks: decimalArb,
    pidfsIno: fc.option(decimalArb, { nil: undefined }),
  })
  .map(({ bootId, pid, startTicks, pidfsIno }) => ({
    v: 1 as const,
    platform: 'linux' as const,
    bootId,
    pid,
    startTicks,
    pgid: pid,
    ...(pidfsIno === undefined ? {} : { pidfsIno }),
  }));

test('formatHandle and parseHandle are exact inverses (property)', (t) => {
  fc.assert(
    fc.property(handleArb, (handle) => {
      const text = formatHandle(handle);
      t.deepEqual(parseHandle(text), handle);
      return formatHandle(parseHandle(text)) === text && Buffer.byteLength(text) <= HANDLE_MAX_BYTES;
    }),
    { numRuns: 2000 },
  );
});

const sample = formatHandle({
  v: 1,
  platform: 'linux',
  bootId: 'c9b1fe21-2cf3-46b0-af2b-691bcc829792',
  pid: 4242,
  startTicks: '987654',
  pgid: 4242,
  pidfsIno: '5678',
});
const sampleObject = JSON.parse(sample) as Record<string, unknown>;
const withField = (changes: Record<string, unknown>) => JSON.stringify({ ...sampleObject, ...changes });

const malformed: Array<[string, unknown, string]> = [
  ['not a string', 42, 'ERR_PIDFENCE_HANDLE_TYPE'],
  ['over the size cap', ' '.repeat(HANDLE_MAX_BYTES + 1), 'ERR_PIDFENCE_HANDLE_TOO_LARGE'],
  ['not JSON', '{v:1}', 'ERR_PIDFENCE_HANDLE_SYNTAX'],
  ['a JSON array', '[1]', 'ERR_PIDFENCE_HANDLE_SYNTAX'],
  ['JSON null', 'null', 'ERR_PIDFENCE_HANDLE_SYNTAX'],
  ['an unknown key', withField({ command: 'sleep 3600' }), 'ERR_PIDFENCE_HANDLE_UNKNOWN_KEY'],
  ['a missing key', JSON.stringify({ ...sampleObject, startTicks: undefined }), 'ERR_PIDFENCE_HANDLE_MISSING_KEY'],
  ['an unknown version', withField({ v: 3 }), 'ERR_PIDFENCE_HANDLE_VERSION'],
  ['a v2 key in a v1 handle', withField({ pidNs: '4026531836' }), 'ERR_PIDFENCE_HANDLE_UNKNOWN_KEY'],
  ['a string version', withField({ v: '1' }), 'ERR_PIDFENCE_HANDLE_VERSION'],
  ['an unknown platform', withField({ platform: 'darwin' }), 'ERR_PIDFENCE_HANDLE_PLATFORM'],
  ['a pid of the wrong type', withField({ pid: '4242', pgid: '4242' }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['a pid out of range', withField({ pid: 4_194_305, pgid: 4_194_305 }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['a fractional pid', withField({ pid: 42.5, pgid: 42.5 }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['a pgid different from the pid', withField({ pgid: 4243 }), 'ERR_PIDFENCE_HANDLE_PGID'],
  ['an uppercase boot id', withField({ bootId: 'C9B1FE21-2CF3-46B0-AF2B-691BCC829792' }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['start ticks as a number', withField({ startTicks: 987654 }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['start ticks beyond 64 bits', withField({ startTicks: '18446744073709551616' }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['a pidfs inode with a sign', withField({ pidfsIno: '-5' }), 'ERR_PIDFENCE_HANDLE_FIELD'],
  ['extra whitespace', sample.replace(':', ': '), 'ERR_PIDFENCE_HANDLE_NOT_CANONICAL'],
  ['another key order', JSON.stringify({ platform: 'linux', ...sampleObject }), 'ERR_PIDFENCE_HANDLE_NOT_CANONICAL'],
  ['a duplicate key', sample.replace('"pid":4242', '"pid":1,"pid":4242'), 'ERR_PIDFENCE_HANDLE_NOT_CANONICAL'],
];

for (const [what, text, code] of malformed) {
  test(`parseHandle rejects ${what} with ${code}`, (t) => {
    const error = t.throws(() => parseHandle(text)) as (PidfenceTypeError | PidfenceRangeError) | undefined;
    t.true(error instanceof PidfenceTypeError || error instanceof PidfenceRangeError);
    t.is(error?.code, code);
    t.regex(error?.message ?? '', /^durable handle rejected: /);
    t.false((error?.message ?? '').includes('4242'), 'the error never echoes handle contents');
  });
}

test('parseHandle never crashes on arbitrary input and accepts only canonical handles (fuzz)', (t) => {
  const nearHandle = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.json({ maxDepth: 2 }),
    handleArb
      .map(formatHandle)
      .chain((text) =>
        fc
          .tuple(fc.nat({ max: text.length }), fc.string({ maxLength: 4 }))
          .map(([at, insert]) => text.slice(0, at) + insert + text.slice(at + 1)),
      ),
  );
  let accepted = 0;
  fc.assert(
    fc.property(nearHandle, (text) => {
      try {
        const handle = parseHandle(text);
        accepted++;
        return formatHandle(handle) === text && handle.pgid === handle.pid;
      } catch (error) {
        return (
          (error instanceof PidfenceTypeError || error instanceof PidfenceRangeError) &&
          /^ERR_PIDFENCE_HANDLE_/.test(error.code)
        );
      }
    }),
    { numRuns: 20_000 },
  );
  t.log(`${accepted} of 20000 mutated inputs were still valid canonical handles`);
  t.pass();
});

/** A subtree a handle can name (docs/decisions/0304): absolute, printable ASCII without `"` or `\`. */
const subtreeArb = fc
  .stringMatching(/^\/[\x20-\x21\x23-\x5b\x5d-\x7e]*$/)
  .filter((text) => text.length <= CGROUP_SUBTREE_HANDLE_MAX_BYTES);

const v2Arb: fc.Arbitrary<DurableProcessHandle> = fc
  .record({
    base: handleArb,
    pidNs: decimalArb,
    cgroup: fc.option(fc.record({ id: decimalArb, subtree: fc.option(subtreeArb, { nil: undefined }) }), {
      nil: undefined,
    }),
  })
  .map(({ base, pidNs, cgroup }) => ({
    ...base,
    v: 2 as const,
    pidNs,
    ...(cgroup === undefined ? {} : { cgroupId: cgroup.id }),
    ...(cgroup?.subtree === undefined ? {} : { cgroupSubtree: cgroup.subtree }),
  }));

test("a v2 handle with its PID namespace and a contained job's cgroup id and subtree round-trips, and the largest one fits the size cap (property; docs/decisions/0180, 0304)", (t) => {
  fc.assert(
    fc.property(v2Arb, (handle) => {
      const text = formatHandle(handle);
      t.deepEqual(parseHandle(text), handle);
      return Buffer.byteLength(text) <= HANDLE_MAX_BYTES;
    }),
    { numRuns: 2000 },
  );
  const max = '18446744073709551615';
  const largest = formatHandle({
    v: 2,
    platform: 'linux',
    bootId: 'c9b1fe21-2cf3-46b0-af2b-691bcc829792',
    pid: 4_194_304,
    startTicks: max,
    pgid: 4_194_304,
    pidfsIno: max,
    pidNs: max,
    cgroupId: max,
    cgroupSubtree: `/${'s'.repeat(CGROUP_SUBTREE_HANDLE_MAX_BYTES - 1)}`,
  });
  t.true(Buffer.byteLength(largest) <= HANDLE_MAX_BYTES);
  const v2 = JSON.parse(largest) as Record<string, unknown>;
  t.throws(() => parseHandle(JSON.stringify({ ...v2, cgroupId: '-1' })), { code: 'ERR_PIDFENCE_HANDLE_FIELD' });
  t.throws(
    () => parseHandle(withField({ cgroupId: '1' })),
    { code: 'ERR_PIDFENCE_HANDLE_UNKNOWN_KEY' },
    'no cgroup id in a v1 handle',
  );
  const { cgroupId: _id, ...withoutId } = v2;
  t.throws(
    () => parseHandle(JSON.stringify(withoutId)),
    { code: 'ERR_PIDFENCE_HANDLE_FIELD' },
    'a subtree names no cgroup without its id',
  );
  for (const subtree of [
    'relative/dir',
    '/with"quote',
    '/with\\backslash',
    '/non-ascii-\u00e9',
    `/${'s'.repeat(CGROUP_SUBTREE_HANDLE_MAX_BYTES)}`,
  ])
    t.throws(
      () => parseHandle(JSON.stringify({ ...v2, cgroupSubtree: subtree })),
      { code: 'ERR_PIDFENCE_HANDLE_FIELD' },
      subtree.slice(0, 20),
    );
});
