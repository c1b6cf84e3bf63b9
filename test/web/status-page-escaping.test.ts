// The status page escapes by construction (issue 31 item 7, docs/decisions/0230): every page, rendered
// with a hostile string in each text it shows (run id, project, subject, states, event facts, error
// text), has exactly the elements and attributes it has with plain values, and shows the string as text.
import test from 'ava';

import type { BlockedPage, ProjectSummary, RunDetail, RunListPage } from '../../lib/management/index';
import { ManagementPlane } from '../../lib/management/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import {
  answerStatusPage,
  renderBlockedPage,
  renderCard,
  renderError,
  renderRun,
  renderRunList,
} from '../../lib/web/status-page';
import { tempFile } from '../helpers/temp-file';

const HOSTILE = `x"><script>alert(1)</script><img src=x onerror=alert(2)>' onmouseover='y' &amp; <!--`;
const AT = 1_700_000_000_000;

/** The names of a tag's attributes, in order. */
function attributeNames(attributes: string): string {
  return [...attributes.matchAll(/([^\s=/]+)(?:=(?:"[^"]*"|'[^']*'))?/g)].map((match) => match[1]).join(' ');
}

/** A page's markup as a list of tags, each with its attribute names: what an injection would change. */
function tagsOf(body: string): string[] {
  const tags = [...body.matchAll(/<(\/?[a-zA-Z!][^\s>/]*)((?:[^>"']|"[^"]*"|'[^']*')*)>/g)];
  const opened = body.split('<').length - 1;
  if (tags.length !== opened) throw new Error(`${opened - tags.length} "<" of the page open no tag`);
  return tags.map(([, name, attributes]) => `${name ?? ''}(${attributeNames(attributes ?? '')})`);
}

const summaryOf = (projectId: string): ProjectSummary => ({
  projectId,
  asOfMs: AT,
  total: 3,
  states: { pending: 0, leased: 0, retry_wait: 1, dispatched: 1, blocked: 1 },
  blockingResults: { identity_mismatch: 1, pid_mismatch: 0, unsupported: 0, invalid: 0 },
  overdue: 0,
  overdueAfterMs: 600_000,
  runEnded: 0,
  running: 1,
  assessment: 'attention_required',
});

const blockedOf = (text: string): BlockedPage => ({
  projectId: text,
  asOfMs: AT,
  next: text,
  items: [
    { runId: text, blockedAtMs: AT },
    { runId: `${text}2`, blockedAtMs: AT + 1 },
  ],
});

// Enums come from the store; a hostile one stands for a store that was written to behind our back.
const runOf = (text: string, dispatchStatus = 'blocked'): RunDetail => ({
  runId: text,
  name: text,
  projectId: text,
  status: text as RunDetail['status'],
  cancelReason: text as RunDetail['cancelReason'],
  createdAtMs: AT,
  startedAtMs: AT + 100,
  endedAtMs: null,
  cancelRequestedAtMs: AT + 200,
  exit: { cause: text as never, exitCode: null, signal: text },
  containment: text as never,
  attempts: [],
  attemptsTruncated: false,
  events: [{ seq: 1, type: text, createdAtMs: AT + 300, detail: { reason: text, result: text, dispatchCount: 1 } }],
  eventsTruncated: true,
  dispatch: {
    runId: text,
    attemptId: text,
    status: dispatchStatus,
    version: 3,
    dispatchCount: 1,
    lastResult: text as never,
    nextAttemptAtMs: null,
    blockedAtMs: AT + 400,
    lastDispatchedAtMs: AT + 400,
    updatedAtMs: AT + 400,
  } as unknown as RunDetail['dispatch'],
});

const runListOf = (text: string, state: string | null): RunListPage => ({
  projectId: text,
  state: state as RunListPage['state'],
  next: text,
  items: [
    {
      runId: text,
      name: text,
      status: text as never,
      cancelReason: text as never,
      createdAtMs: AT,
      startedAtMs: null,
      endedAtMs: AT + 500,
      containment: text as never,
      exit: { cause: text as never, exitCode: null, signal: text },
    },
  ],
});

const PAGES: ReadonlyArray<readonly [string, (text: string) => string]> = [
  ['status card', (text) => renderCard(summaryOf(text), text).body],
  ['blocked runs', (text) => renderBlockedPage(blockedOf(text), 2, text).body],
  ['one blocked run', (text) => renderRun(runOf(text), text).body],
  ['one run', (text) => renderRun(runOf(text, text), text).body],
  ['run list', (text) => renderRunList(runListOf(text, null), 2, text).body],
  ['run list of one state', (text) => renderRunList(runListOf(text, text), 2, text).body],
  ['refusal', (text) => renderError(400, text, text).body],
];

for (const [name, render] of PAGES) {
  test(`the ${name} page: a hostile run id, project, subject or fact adds no element or attribute and reads as text`, (t) => {
    const plain = render('plain-1');
    const hostile = render(HOSTILE);
    t.deepEqual(tagsOf(hostile), tagsOf(plain));
    t.false(hostile.includes('<script'));
    t.false(
      tagsOf(hostile).some((tag) => /[( ]on[a-z]/.test(tag)),
      'no event handler attribute',
    );
    t.true(hostile.includes('x&#34;&#62;&#60;script&#62;alert(1)&#60;/script&#62;'), 'the string is shown, escaped');
  });
}

test('through the request path: a hostile project in the URL gets a refusal page with no markup of its own', async (t) => {
  const at = tempFile('pidfence-escape-');
  t.teardown(() => at.cleanup());
  const store = openSqliteStore(at.file);
  t.teardown(() => store.close());
  const planeOf = (): ManagementPlane => new ManagementPlane({ store: store.managementStore, principal: 'viewer' });
  const plain = await answerStatusPage(`/status/projects/${encodeURIComponent('bad project')}`, planeOf);
  const hostileUrl = `/status/projects/${encodeURIComponent(HOSTILE)}/runs?state=${encodeURIComponent(HOSTILE)}`;
  const hostile = await answerStatusPage(hostileUrl, planeOf);
  t.is(plain.status, 400);
  t.is(hostile.status, 400);
  t.deepEqual(tagsOf(hostile.body), tagsOf(plain.body));
  t.false(hostile.body.includes('<script'));
});
