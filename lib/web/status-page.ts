// The status page (docs/decisions/0111; design/dispatch §5.2-5.4): a project's status card, its blocked
// runs 16 a page through the blocked-page cursor, its runs 16 a page through the run-list cursor
// (docs/decisions/0140), and one run with its dispatch, as server-rendered HTML. Every page acts
// through the management plane as the request's principal, so it shows exactly what `pidfence
// status`, `blocked`, `list` and `show` would: never an owner, token, PID or command.
import { httpStatusOf } from '../base/error-registry';
import {
  BLOCKING_RESULTS,
  DISPATCH_STATUSES,
  RUN_STATUSES,
  type DispatchInspection,
  type RunStatus,
} from '../contract/index';
import type {
  BlockedPage,
  ManagementPlane,
  ProjectSummary,
  RunDetail,
  RunExit,
  RunListPage,
} from '../management/index';
import { html, renderPage, redirectTo, renderTime, type Html, type HtmlReply } from './html';

export type { HtmlReply } from './html';

/** Where the pages live on every server that serves them. */
export const STATUS_ROOT = '/status';

const ASSESSMENT_TEXT: Readonly<Record<ProjectSummary['assessment'], string>> = {
  clear: 'clear',
  converging: 'converging',
  attention_required: 'attention required',
};

/** The plane of the request's principal; throws a PidfenceError when no principal can be proved. */
export type PlaneOf = () => ManagementPlane;

/** The dash of a fact that has no value. */
const NONE = html`<span class="none">–</span>`;

const projectPath = (projectId: string): string => `${STATUS_ROOT}/projects/${encodeURIComponent(projectId)}`;
const runPath = (runId: string): string => `${STATUS_ROOT}/runs/${encodeURIComponent(runId)}`;

function nav(subject: string | null, projectId?: string): Html {
  const links = [html`<a href="${STATUS_ROOT}">Projects</a>`];
  if (projectId !== undefined) {
    links.push(
      html`<a href="${projectPath(projectId)}">Status of ${projectId}</a>`,
      html`<a href="${projectPath(projectId)}/blocked">Blocked runs</a>`,
      html`<a href="${projectPath(projectId)}/runs">Runs</a>`,
    );
  }
  const who = subject === null ? '' : html`<span class="muted">as <b data-fact="principal">${subject}</b></span>`;
  return html`<nav>${links}${who}</nav>`;
}

function count(label: string, value: number, fact: string): Html {
  return html`<div class="count"><b data-fact="${fact}">${value}</b><span>${label}</span></div>`;
}

function minutes(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1_000} s`;
}

export function renderCard(summary: ProjectSummary, subject: string | null): HtmlReply {
  const { projectId } = summary;
  const states = DISPATCH_STATUSES.map((state) =>
    count(state.replace('_', ' '), summary.states[state], `state-${state}`),
  );
  const blocking = BLOCKING_RESULTS.map(
    (result) =>
      html`<tr><td>${result}</td><td class="n" data-fact="blocked-by-${result}">${summary.blockingResults[result]}</td></tr>`,
  );
  const content = html`<section class="card" aria-label="status card">
<h1>Project <span data-fact="project">${projectId}</span></h1>
<div class="assessment ${summary.assessment}" data-fact="assessment" data-value="${summary.assessment}">${ASSESSMENT_TEXT[summary.assessment]}</div>
<p class="muted">as of ${renderTime(summary.asOfMs)} (database time) · ${summary.total} dispatch record(s)</p>
<h2>Dispatches by state</h2>
<div class="grid">${states}</div>
<h2>Attention</h2>
<div class="grid">${count(`overdue (due longer than ${minutes(summary.overdueAfterMs)})`, summary.overdue, 'overdue')}${count('running jobs', summary.running, 'running')}${count('unsettled, run ended', summary.runEnded, 'run-ended')}</div>
<h2>Blocking results</h2>
<table><thead><tr><th>blocked by</th><th class="n">runs</th></tr></thead><tbody>${blocking}</tbody></table>
<p><a href="${projectPath(projectId)}/blocked" data-link="blocked">Blocked runs (${summary.states.blocked}) →</a>
· <a href="${projectPath(projectId)}/runs?state=running" data-link="running">Running jobs (${summary.running}) →</a>
· <a href="${projectPath(projectId)}/runs" data-link="runs">All runs →</a></p>
</section>`;
  return renderPage(200, `${projectId}: ${ASSESSMENT_TEXT[summary.assessment]}`, nav(subject, projectId), content);
}

export function renderBlockedPage(page: BlockedPage, pageNumber: number, subject: string | null): HtmlReply {
  const rows = page.items.map(
    (item) =>
      html`<tr data-row="blocked"><td><a href="${runPath(item.runId)}">${item.runId}</a></td><td>${renderTime(item.blockedAtMs)}</td></tr>`,
  );
  const next =
    page.next === null
      ? html`<span class="muted" data-fact="last-page">last page</span>`
      : html`<a rel="next" data-link="next" href="${projectPath(page.projectId)}/blocked?cursor=${encodeURIComponent(page.next)}&amp;page=${pageNumber + 1}">Next 16 →</a>`;
  const first =
    pageNumber > 1 ? html`<a href="${projectPath(page.projectId)}/blocked" data-link="first">← First page</a>` : '';
  const content = html`<h1>Blocked runs of ${page.projectId}</h1>
<p class="muted">Page <span data-fact="page">${pageNumber}</span>, oldest first, as blocked by ${renderTime(page.asOfMs)}: a run blocked later never slips into this walk. Each needs a diagnosis, then <code>pidfence rearm</code>.</p>
<table><thead><tr><th>run</th><th>blocked at</th></tr></thead><tbody>${rows.length > 0 ? rows : html`<tr><td colspan="2" class="none">nothing is blocked</td></tr>`}</tbody></table>
<div class="pager">${first}${next}</div>`;
  return renderPage(200, `blocked runs of ${page.projectId}`, nav(subject, page.projectId), content);
}

/** Label/value rows, each cell named `data-fact="<prefix><label>"`. */
function renderFacts(facts: ReadonlyArray<readonly [string, Html | string | number]>, prefix = ''): Html {
  return html`<table><tbody>${facts.map(([label, value]) => html`<tr><th>${label}</th><td data-fact="${prefix}${label.replace(/ /g, '-')}">${value}</td></tr>`)}</tbody></table>`;
}

/** One run's cancellation dispatch as `pidfence inspect` shows it, with the exact rearm for a blocked one. */
function dispatchSection(inspection: DispatchInspection | null): Html {
  if (inspection === null)
    return html`<h2>Cancellation dispatch</h2><p class="muted" data-fact="dispatch">none: no stop was ever claimed for this run</p>`;
  const facts: Array<[string, Html | string | number]> = [
    ['status', inspection.status],
    ['version', inspection.version],
    ['attempt', inspection.attemptId],
    ['dispatch count', inspection.dispatchCount],
    ['last result', inspection.lastResult === null ? NONE : inspection.lastResult],
    ['next due', renderTime(inspection.nextAttemptAtMs)],
    ['blocked at', renderTime(inspection.blockedAtMs)],
    ['last dispatched', renderTime(inspection.lastDispatchedAtMs)],
    ['updated', renderTime(inspection.updatedAtMs)],
  ];
  const rearm =
    inspection.status === 'blocked' && inspection.lastResult !== null
      ? html`<p>Once the cause is understood: <code>pidfence rearm ${inspection.runId} --expect-version ${inspection.version} --expect-result ${inspection.lastResult}</code> (needs run.stop).</p>`
      : '';
  return html`<h2>Cancellation dispatch</h2>
${renderFacts(facts, 'dispatch-')}
${rearm}`;
}

/** How a run ended, in a few words: its exit code or signal, and how that was known. */
function exitText(exit: RunExit | null): Html {
  if (exit === null) return NONE;
  const how = exit.exitCode !== null ? `exit ${exit.exitCode}` : exit.signal !== null ? exit.signal : 'no exit status';
  return html`${how} <span class="muted">(${exit.cause.replace('_', ' ')})</span>`;
}

/** A run's name (docs/decisions/0251), escaped like every stored text. */
/** A run's name (docs/decisions/0251) as text, or the dash of "none". */
function nameText(name: string | null): Html | string {
  return name === null ? NONE : name;
}

/** Whether what the job left behind was stopped, or kept running by its `keep` (docs/decisions/0302). */
function leftoversText(run: RunDetail): string {
  const latest = run.attempts[run.attempts.length - 1];
  return latest?.leftovers === 'keep' ? 'keep (left running when the job ended)' : 'stop';
}

export function renderRun(run: RunDetail, subject: string | null): HtmlReply {
  const facts: Array<[string, Html | string | number]> = [
    ['name', nameText(run.name)],
    ['status', run.status],
    ['cancel reason', run.cancelReason === null ? NONE : run.cancelReason],
    ['created', renderTime(run.createdAtMs)],
    ['started', renderTime(run.startedAtMs)],
    ['cancel requested', renderTime(run.cancelRequestedAtMs)],
    ['ended', renderTime(run.endedAtMs)],
    ['exit', exitText(run.exit)],
    ['containment', run.containment ?? NONE],
    ['leftovers', leftoversText(run)],
  ];
  const events = run.events.map(
    (event) =>
      html`<tr><td class="n">${event.seq}</td><td>${event.type}</td><td>${renderTime(event.createdAtMs)}</td><td class="muted">${Object.entries(
        event.detail,
      )
        .map(([key, value]) => `${key} ${value ?? '–'}`)
        .join(', ')}</td></tr>`,
  );
  const content = html`<section class="card"><h1>Run <span data-fact="run">${run.runId}</span></h1>
${renderFacts(facts)}
${dispatchSection(run.dispatch)}
<h2>Events</h2>
<table><thead><tr><th class="n">#</th><th>event</th><th>at</th><th>facts</th></tr></thead><tbody>${events}</tbody></table>
${run.eventsTruncated ? html`<p class="muted">Later events are left out; <code>pidfence show</code> has the same limit.</p>` : ''}</section>`;
  return renderPage(200, `run ${run.runId}`, nav(subject, run.projectId), content);
}

/** The run-list page size: the same 16 as the blocked drill-down. */
export const RUN_PAGE_SIZE = 16;

export function renderRunList(page: RunListPage, pageNumber: number, subject: string | null): HtmlReply {
  const base = `${projectPath(page.projectId)}/runs`;
  const rows = page.items.map(
    (item) =>
      html`<tr data-row="run"><td><a href="${runPath(item.runId)}">${item.runId}</a></td><td data-name>${nameText(item.name)}</td><td data-status="${item.status}">${item.status}</td><td>${item.cancelReason === null ? NONE : item.cancelReason}</td><td>${renderTime(item.createdAtMs)}</td><td>${renderTime(item.endedAtMs)}</td><td>${exitText(item.exit)}</td><td data-containment>${item.containment ?? NONE}</td></tr>`,
  );
  const options = ['', ...RUN_STATUSES].map((state) =>
    (page.state ?? '') === state
      ? html`<option value="${state}" selected>${state === '' ? 'every state' : state}</option>`
      : html`<option value="${state}">${state === '' ? 'every state' : state}</option>`,
  );
  const next =
    page.next === null
      ? html`<span class="muted" data-fact="last-page">last page</span>`
      : html`<a rel="next" data-link="next" href="${base}?cursor=${encodeURIComponent(page.next)}&amp;page=${pageNumber + 1}">Next 16 →</a>`;
  const first =
    pageNumber > 1
      ? html`<a href="${base}${page.state === null ? '' : `?state=${page.state}`}" data-link="first">← First page</a>`
      : '';
  const content = html`<h1>Runs of ${page.projectId}</h1>
<form method="get" action="${base}"><label>State <select name="state">${options}</select></label> <button>Show</button></form>
<p class="muted">Page <span data-fact="page">${pageNumber}</span>, newest first${page.state === null ? '' : html`, <span data-fact="state">${page.state}</span> only`}.</p>
<table><thead><tr><th>run</th><th>name</th><th>state</th><th>stop asked by</th><th>created</th><th>ended</th><th>exit</th><th>containment</th></tr></thead><tbody>${rows.length > 0 ? rows : html`<tr><td colspan="8" class="none">no runs</td></tr>`}</tbody></table>
<div class="pager">${first}${next}</div>`;
  return renderPage(200, `runs of ${page.projectId}`, nav(subject, page.projectId), content);
}

function renderIndex(): HtmlReply {
  return renderPage(
    200,
    'status',
    nav(null),
    html`<section class="card"><h1>pidfence status</h1>
<form method="get" action="${STATUS_ROOT}"><label>Project <input name="project" required maxlength="128" autofocus></label> <button>Show</button></form>
<p class="muted">Needs run.read on the project, as <code>pidfence status</code> does.</p></section>`,
    { refresh: false },
  );
}

/** A refusal as a page: its sentence and its stable code. */
export function renderError(status: number, message: string, code: string): HtmlReply {
  return renderPage(
    status,
    'refused',
    nav(null),
    html`<section class="card"><h1>${status === 404 ? 'Not found' : status < 500 ? 'Refused' : 'Unavailable'}</h1><p data-fact="error">${message}</p><p class="muted"><code data-fact="code">${code}</code></p></section>`,
  );
}

function answerError(error: unknown): HtmlReply {
  const code = (error as { code?: unknown } | null)?.code;
  if (!(error instanceof Error) || typeof code !== 'string' || !code.startsWith('ERR_PIDFENCE_')) {
    return renderError(500, 'the page failed; try again, then report it.', 'ERR_PIDFENCE_STATUS_PAGE_FAILED');
  }
  const status = httpStatusOf(code);
  // A 5xx says only its code: a store's message may carry database detail.
  return renderError(status, status >= 500 ? 'the store did not answer; try again shortly.' : error.message, code);
}

const NOT_FOUND = (): HtmlReply =>
  renderError(404, 'there is no such page; start from the project form.', 'ERR_PIDFENCE_STATUS_NO_PAGE');

function parsePageNumber(value: string | null): number {
  const number = Number(value ?? '1');
  return Number.isSafeInteger(number) && number >= 1 && number <= 1_000_000 ? number : 1;
}

/**
 * One request under STATUS_ROOT: `url` is the request target (path and query). Never throws; every
 * refusal is a page with its code.
 */
export async function answerStatusPage(url: string, planeOf: PlaneOf): Promise<HtmlReply> {
  let parsed: URL;
  let segments: string[];
  try {
    parsed = new URL(url, 'http://status.invalid');
    segments = parsed.pathname
      .split('/')
      .filter((segment) => segment !== '')
      .map((segment) => decodeURIComponent(segment));
  } catch {
    return NOT_FOUND();
  }
  if (segments[0] !== STATUS_ROOT.slice(1)) return NOT_FOUND();
  const [, kind, id, sub, ...rest] = segments;
  try {
    if (kind === undefined) {
      const project = parsed.searchParams.get('project');
      return project === null || project.trim() === '' ? renderIndex() : redirectTo(projectPath(project.trim()));
    }
    if (id === undefined || rest.length > 0) return NOT_FOUND();
    if (kind === 'projects' && sub === undefined) {
      const plane = planeOf();
      return renderCard(await plane.summary(id), plane.subject);
    }
    if (kind === 'projects' && sub === 'blocked') {
      const plane = planeOf();
      const cursor = parsed.searchParams.get('cursor');
      const page = await plane.blockedPage(id, cursor === null || cursor === '' ? undefined : cursor);
      return renderBlockedPage(
        page,
        cursor === null ? 1 : parsePageNumber(parsed.searchParams.get('page')),
        plane.subject,
      );
    }
    if (kind === 'projects' && sub === 'runs') {
      const plane = planeOf();
      const cursor = parsed.searchParams.get('cursor');
      const state = parsed.searchParams.get('state');
      const page = await plane.listRuns({
        projectId: id,
        limit: RUN_PAGE_SIZE,
        ...(cursor === null || cursor === '' ? {} : { cursor }),
        ...(state === null || state === '' ? {} : { state: state as RunStatus }),
      });
      return renderRunList(
        page,
        cursor === null || cursor === '' ? 1 : parsePageNumber(parsed.searchParams.get('page')),
        plane.subject,
      );
    }
    if (kind === 'runs' && sub === undefined) {
      const plane = planeOf();
      return renderRun(await plane.showRun(id), plane.subject);
    }
    return NOT_FOUND();
  } catch (error) {
    return answerError(error);
  }
}
