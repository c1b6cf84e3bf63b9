// docs/prometheus-rules.yml (issue 17 item 3, docs/decisions/0113) under Prometheus's own promtool: the
// file loads (`check rules`), and its alerts fire for exactly the projects `pidfence status` calls
// attention_required — the expectation of every case is computed by checkedSummary, the function
// behind the status command's exit code, from the same counts the gauges carry.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { DISPATCH_STATUSES, type StateCounts, type SummaryCounts } from '../../lib/contract/index';
import { checkedSummary } from '../../lib/management/index';
import { ensurePromtool } from '../helpers/test-tools';

const RULES = path.resolve(__dirname, '..', '..', '..', 'docs', 'prometheus-rules.yml');
const OVERDUE_AFTER_MS = 600_000;

interface Case {
  readonly project: string;
  readonly states: Partial<StateCounts>;
  readonly overdue: number;
}

/** clear, converging, blocked, overdue, both; and one project seen by two replicas. */
const CASES: readonly Case[] = [
  { project: 'p-clear', states: { dispatched: 4 }, overdue: 0 },
  { project: 'p-converging', states: { pending: 2, leased: 1, retry_wait: 1 }, overdue: 0 },
  { project: 'p-blocked', states: { dispatched: 1, blocked: 2 }, overdue: 0 },
  { project: 'p-overdue', states: { retry_wait: 3 }, overdue: 1 },
  { project: 'p-both', states: { leased: 1, blocked: 1 }, overdue: 1 },
];

function summaryOf(entry: Case): ReturnType<typeof checkedSummary> {
  const states = Object.fromEntries(
    DISPATCH_STATUSES.map((state) => [state, entry.states[state] ?? 0]),
  ) as unknown as StateCounts;
  const blocked = states.blocked;
  const counts: SummaryCounts = {
    permitted: false,
    asOfMs: 1,
    total: DISPATCH_STATUSES.reduce((sum, state) => sum + states[state], 0),
    states,
    blockingResults: { identity_mismatch: blocked, pid_mismatch: 0, unsupported: 0, invalid: 0 },
    overdue: entry.overdue,
    running: 0,
    runEnded: 0,
  };
  return checkedSummary(entry.project, counts, OVERDUE_AFTER_MS);
}

/** What an operator reads on each alert, as the rules' templates render it. */
const ANNOTATIONS = {
  PidfenceAttentionRequired: ({ project }: Case) => ({
    summary: `pidfence project ${project}: attention required`,
    description: `A cancellation of project ${project} is blocked (its process could not be proved) or overdue: \`pidfence status --project ${project}\` exits 20. See the blocked runs with \`pidfence blocked --project ${project}\` or on /status.`,
  }),
  PidfenceDispatchOverdue: ({ project, overdue }: Case) => ({
    summary: `pidfence project ${project}: ${overdue} cancellation(s) overdue`,
    description: `Due cancellations of project ${project} have waited longer than the overdue bound: no runner is keeping up (is \`pidfence supervise\` running on the job's host?).`,
  }),
} as const;

function promtool(args: readonly string[]): { status: number | null; output: string } {
  const result = spawnSync(ensurePromtool(), [...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** A `promtool test rules` file: the gauges of every case (p-both from two replicas), and the expected alerts. */
function unitTests(expectations: (entry: Case) => { attention: boolean; overdue: boolean }): string {
  const series: string[] = [];
  for (const entry of CASES) {
    for (const instance of entry.project === 'p-both' ? ['cp-1', 'cp-2'] : ['cp-1']) {
      for (const state of DISPATCH_STATUSES)
        series.push(
          `      - series: 'pidfence_dispatches{project="${entry.project}",state="${state}",instance="${instance}"}'\n        values: '${entry.states[state] ?? 0}x10'`,
        );
      series.push(
        `      - series: 'pidfence_dispatches_overdue{project="${entry.project}",instance="${instance}"}'\n        values: '${entry.overdue}x10'`,
      );
    }
  }
  const alerts = (name: keyof typeof ANNOTATIONS, projects: readonly Case[]): string => `      - eval_time: 5m
        alertname: ${name}
        exp_alerts:${projects.length === 0 ? ' []' : ''}
${projects
  .map(
    (entry) => `          - exp_labels: { project: ${entry.project}, severity: warning }
            exp_annotations: ${JSON.stringify(ANNOTATIONS[name](entry))}`,
  )
  .join('\n')}`;
  const attention = CASES.filter((entry) => expectations(entry).attention);
  const overdue = CASES.filter((entry) => expectations(entry).overdue);
  const recorded = CASES.map(
    (entry) =>
      `          - labels: 'pidfence:attention_required{project="${entry.project}"}'\n            value: ${expectations(entry).attention ? 1 : 0}`,
  ).join('\n');
  return `rule_files:
  - ${RULES}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
${series.join('\n')}
    alert_rule_test:
${alerts('PidfenceAttentionRequired', attention)}
${alerts('PidfenceDispatchOverdue', overdue)}
    promql_expr_test:
      - expr: pidfence:attention_required
        eval_time: 5m
        exp_samples:
${recorded}
`;
}

test('docs/prometheus-rules.yml loads in promtool', (t) => {
  const checked = promtool(['check', 'rules', RULES]);
  t.is(checked.status, 0, checked.output);
  t.regex(checked.output, /SUCCESS: 4 rules found/);
});

test('its alerts fire for exactly the projects pidfence status calls attention_required, and its overdue alert for the overdue ones', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-rules-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const assessments = CASES.map((entry) => summaryOf(entry).assessment);
  t.deepEqual(
    assessments,
    ['clear', 'converging', 'attention_required', 'attention_required', 'attention_required'],
    'the cases cover all three assessments',
  );
  const fromStatus = (entry: Case) => ({
    attention: summaryOf(entry).assessment === 'attention_required',
    overdue: entry.overdue > 0,
  });
  const file = path.join(dir, 'rules.test.yml');
  writeFileSync(file, unitTests(fromStatus));
  const passed = promtool(['test', 'rules', file]);
  t.is(passed.status, 0, passed.output);
  t.regex(passed.output, /SUCCESS/);

  // The check can fail: calling a converging project attention_required is caught.
  writeFileSync(
    file,
    unitTests((entry) => ({ ...fromStatus(entry), attention: entry.project !== 'p-clear' })),
  );
  const wrong = promtool(['test', 'rules', file]);
  t.not(wrong.status, 0);
  t.regex(wrong.output, /PidfenceAttentionRequired/);
});
