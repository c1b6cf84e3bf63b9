// ava config for the arm64 run under qemu-user (native/tools/test-arm64.sh); docs/decisions/0003.
// Every native test file runs except what emulation itself cannot do, listed below with why.
export default {
  files: [
    'dist/test/native/**/*.test.js',
    // binfmt_misc is not mounted, so the emulated node cannot exec a `node` child (ENOEXEC);
    // host binaries (sh, sleep) start fine. These files are about node children as a whole.
    '!dist/test/native/prebuilds.test.js', // also checks the arm64 file's digest on the host
    '!dist/test/native/60-no-addon.test.js',
  ],
  match: [
    // Spawns `node` as uid 65534 (see above).
    '!an unprivileged caller gets error EPERM*',
    // qemu-user answers /proc/self/stat (and /proc/<own pid>/stat) with a synthetic 44-field
    // line (state "0", pgrp 0) that the parser rightly refuses (EPROTO); these tests read the
    // test process's own stat, or count fields from it for their reference parser.
    '!readProcessStat keeps start ticks as an exact decimal string',
    '!readProcessStat parses comm *',
    '!the counters are live*',
    // Needs a forced PID reuse within one 10 ms clock tick; emulated spawns are too slow for
    // that (293 forced reuses, none in the same tick). Its pidfs checks pass here meanwhile.
    '!a reused PID, even within the same clock tick*',
  ],
  // No child processes for workers: one worker thread at a time, tests within a file serially.
  // qemu-user forks a multithreaded guest unsafely: concurrent spawns from several threads left
  // children hung between fork and exec (no output in 5 s) and once aborted qemu at exit.
  workerThreads: true,
  concurrency: 1,
  serial: true,
  timeout: '5m',
};
