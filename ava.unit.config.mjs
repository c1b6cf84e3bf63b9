// `npm run test:unit` (docs/decisions/0232): the tests that need no root, no PostgreSQL and no system
// package, for a contributor's laptop. Every other test runs in `npm test`, the full suite CI runs.
// The suites that run on every store run on SQLite alone here (PIDFENCE_TEST_STORES=sqlite).
// test/package/unit-subset.test.ts holds this list to the reasons below.
import { readFileSync } from 'node:fs';

const base = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')).ava;

/** Left to `npm test`, each for its reason: a PostgreSQL server or throw-away cluster. */
export const NEEDS_POSTGRES = [
  'cli/postgres-setup',
  'cli/postgres-walkthrough',
  'cluster/clock-step-worker',
  'cluster/job-nice',
  'cluster/completion-page',
  'cluster/control-plane',
  'cluster/dispatch-control',
  'cluster/fleet',
  'cluster/gate13',
  'cluster/ha-wrapper.slow',
  'cluster/lease-page',
  'cluster/leases',
  'cluster/metrics-and-status',
  'cluster/named-pull',
  'cluster/operator-cli',
  'cluster/page-wait',
  'cluster/project-cancel',
  'cluster/replicas',
  'cluster/revocation',
  'cluster/stop-push',
  'cluster/stop-push-restart',
  'cluster/tls-reload',
  'cluster/unnamed-leases',
  'cluster/unreachable',
  'cluster/worker-gaps',
  'cluster/worker-stop-page',
  'cluster/worker-tick',
  'execution/clock-postgres',
  'execution/lifecycle-gates',
  'execution/postgres',
  'execution/postgres-hosts',
  'execution/start-window',
  'helpers/postgres-harness',
  'management/cli',
  'management/postgres',
  // Compare the two stores case by case.
  'store/attempt-end-page',
  'store/dispatch-rules',
  'store/postgres',
  'store/postgres-acknowledged-sync',
  'store/postgres-bounded-wait',
  'store/postgres-gate11',
  'store/postgres-ha.slow',
  'web/status-page-browser',
];

/** Root: another uid for a child or a file, a PID forced through ns_last_pid, a PID namespace. */
export const NEEDS_ROOT = [
  'helpers/job-groups',
  'execution/containment',
  'cli/bad-input',
  'cli/own-store',
  'cli/principal',
  'cli/runs',
  'cli/store-trouble',
  'dispatch/controller-failure',
  'execution/full-disk',
  'execution/job-logs',
  'execution/launcher',
  'execution/pid-namespace',
  'metrics/supervise',
  'native/pid-reuse',
  'native/signal-verified',
];

/**
 * A system package (strace, promtool, chromium, openssl, the C compiler that builds the clock-step
 * shim), or npm's cache for an offline install of the tarball.
 */
export const NEEDS_SYSTEM = [
  'cluster/crl',
  'cluster/replica-set',
  'execution/clock-dispatch',
  'execution/clock-step',
  'metrics/alert-rules',
  'native/job-cgroup-lookup',
  'package/consumer-types',
  'package/readme',
  'package/tarball',
  'store/sqlite-acknowledged-sync',
];

const left = [...NEEDS_POSTGRES, ...NEEDS_ROOT, ...NEEDS_SYSTEM].map((name) => `!dist/test/${name}.test.js`);

export default {
  ...base,
  files: ['dist/test/**/*.test.js', ...left],
  environmentVariables: { PIDFENCE_TEST_STORES: 'sqlite' },
};
