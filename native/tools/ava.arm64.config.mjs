// ava config for the arm64 run under qemu-user (native/tools/test-arm64.sh); docs/decisions/0003.
// Every native test file runs except what emulation itself cannot do, listed below with why.
export default {
  files: [
    'dist/test/native/**/*.test.js',
    'dist/test/process/**/*.test.js',
    // binfmt_misc is not mounted, so the emulated node cannot exec a `node` child (ENOEXEC);
    // host binaries (sh, sleep) start fine. These files are about node children as a whole.
    '!dist/test/native/prebuilds.test.js', // also checks the arm64 file's digest on the host
    // The emulated node cannot exec the arm64 launcher either (same cause); its digest and ELF
    // checks run on the host for both architectures.
    '!dist/test/native/launcher-prebuilds.test.js',
    '!dist/test/native/no-addon.test.js',
    '!dist/test/native/workers.test.js', // each trial is a `node` child (worker-scenario-child.js)
    // Each count is a `node` child under strace; the remembered names themselves are exercised here by
    // job-cgroup.test.js (a cgroup re-created under a name the addon remembered).
    '!dist/test/native/job-cgroup-lookup.test.js',
    // Compiles native/proc_stat.cc for the host and runs it there: nothing of it is emulated.
    '!dist/test/native/proc-stat-release.test.js',
  ],
  match: [
    // Spawns `node` as uid 65534 (see above).
    '!an unprivileged caller gets error EPERM*',
    '!without the addon every request answers unsupported*',
    // (qemu-user answers /proc/self/stat with a synthetic line; no test reads its own stat.)
    // Needs a PID reuse within one 10 ms clock tick; between the fixture's two forks the emulated
    // node must read a line and capture an identity, which takes longer than a tick under qemu
    // (20 of 20 reuses forced and refused by pidfs inode, none in the same tick). It runs on x64.
    '!gate 8: a reused PID, even within the same clock tick*',
  ],
  // No child processes for workers: one worker thread at a time, tests within a file serially.
  // qemu-user forks a multithreaded guest unsafely: concurrent spawns from several threads left
  // children hung between fork and exec (no output in 5 s) and once aborted qemu at exit.
  workerThreads: true,
  concurrency: 1,
  serial: true,
  timeout: '5m',
};
