// The fleet on the status page (docs/decisions/0245): every worker's name, version, state, sessions,
// last heartbeat, leases held and capacity, as `pidfence workers` shows them, for a holder of
// worker.read on @cluster. Server-rendered, no script; every value escaped by the `html` template
// (docs/decisions/0230).
import { errorCategory } from '../base/error-registry';
import { WORKER_STATES, type WorkerFleet, type WorkerView } from '../contract/index';
import { html, renderPage, renderTime, type Html, type HtmlReply } from './html';
import { renderError, STATUS_ROOT } from './status-page';

/** Where the fleet page lives, beside the project pages. */
export const WORKERS_PATH = `${STATUS_ROOT}/workers`;

/** An age as people read it: 850 ms, 12 s, 4 min, 3 h. */
export function ageText(ms: number | null): string {
  if (ms === null) return 'never';
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1_000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

const NONE = html`<span class="none">–</span>`;

function row(worker: WorkerView): Html {
  const cell = (value: string | number | null, fact: string): Html =>
    html`<td data-fact="${fact}">${value === null ? NONE : value}</td>`;
  return html`<tr data-row="worker" data-worker="${worker.name}">${cell(worker.name, 'name')}${cell(worker.version, 'version')}<td data-fact="state" data-state="${worker.state}">${worker.state}</td>${cell(worker.sessions, 'sessions')}${cell(ageText(worker.lastHeartbeatAgeMs), 'heartbeat')}${cell(worker.leasesHeld, 'leases')}${cell(worker.runsUnreachable, 'unreachable')}${cell(worker.capacity, 'capacity')}</tr>`;
}

export function renderWorkers(fleet: WorkerFleet, subject: string): HtmlReply {
  const counts = WORKER_STATES.map(
    (state) =>
      html`<div class="count"><b data-fact="state-${state}">${fleet.workers.filter((worker) => worker.state === state).length}</b><span>${state}</span></div>`,
  );
  const rows = fleet.workers.map(row);
  const navigation = html`<nav><a href="${STATUS_ROOT}">Projects</a><a href="${WORKERS_PATH}">Workers</a><span class="muted">as <b data-fact="principal">${subject}</b></span></nav>`;
  const content = html`<section class="card" aria-label="workers"><h1>Workers</h1>
<p class="muted">as of ${renderTime(fleet.asOfMs)} (database time) · ${fleet.workers.length} worker(s)${fleet.truncated ? ', more not shown' : ''}</p>
<div class="grid">${counts}</div>
<table><thead><tr><th>worker</th><th>version</th><th>state</th><th>sessions</th><th>last heartbeat</th><th>leases</th><th>unreachable</th><th>capacity</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="7" class="none">no worker has registered</td></tr>`}</tbody></table>
<p class="muted"><code>pidfence worker cordon|drain|uncordon|revoke|reinstate NAME</code> (needs worker.manage on @cluster).</p></section>`;
  return renderPage(200, 'workers', navigation, content);
}

/** The page, or its refusal as a page with its code (a 5xx says only its code). */
export async function answerWorkersPage(
  read: () => Promise<{ readonly fleet: WorkerFleet; readonly subject: string }>,
): Promise<HtmlReply> {
  try {
    const { fleet, subject } = await read();
    return renderWorkers(fleet, subject);
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (!(error instanceof Error) || typeof code !== 'string' || !code.startsWith('ERR_PIDFENCE_')) {
      return renderError(500, 'the page failed; try again, then report it.', 'ERR_PIDFENCE_STATUS_PAGE_FAILED');
    }
    const category = errorCategory(code);
    const status = category === 'input' ? 400 : category === 'refused' ? 403 : category === 'unavailable' ? 503 : 500;
    return renderError(status, status >= 500 ? 'the store did not answer; try again shortly.' : error.message, code);
  }
}
