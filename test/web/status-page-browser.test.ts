// The status page in a real browser (issue 17 item 4, docs/decisions/0111, 0113): Debian's chromium,
// driven by playwright-core with JavaScript turned off, against a real control plane on loopback
// (HTTPS, client certificate) over a seeded PostgreSQL database. The card says what `pidfence status`
// says; the blocked drill-down walks 40 blocked runs as 16 + 16 + 8, in the order of `pidfence
// blocked`; a screenshot of the card is saved.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

import { startControlPlane, type ControlPlane } from '../../lib/cluster/control-plane';
import { DISPATCH_STATUSES, BLOCKING_RESULTS, type DispatchResult } from '../../lib/contract/index';
import { ManagementPlane } from '../../lib/management/index';
import { openPostgresStore, PostgresGrantAdministration, type PostgresStore } from '../../lib/store/postgres/index';
import { makeCertificates, type Certificates } from '../helpers/certificates';
import { settledRun, type ManagementWorld as SeedWorld } from '../management/management-suite';
import { migratedDatabase, type MigratedDatabase } from '../helpers/pg-store';
import { ensureChromium } from '../helpers/test-tools';

/**
 * Where the screenshots go (ignored by git); docs/status-page.png is one of them, copied by hand
 * after `pngquant 32 --nofs --strip` (17 kB instead of 59 kB in the tarball, no visible change).
 */
const SCREENSHOTS = path.resolve(__dirname, '..', '..', '..', '.pidfence-test', 'screenshots');

/** The flags Chromium needs on this closed network (docs/decisions/0113); playwright adds its own. */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The results that blocked the 40 runs of `shop`, in turn. */
const REFUSALS: readonly DispatchResult[] = ['identity_mismatch', 'identity_mismatch', 'unsupported', 'pid_mismatch'];

interface Seeded {
  readonly database: MigratedDatabase;
  readonly store: PostgresStore;
  readonly certificates: Certificates;
  readonly plane: ControlPlane;
  /** The blocked runs of `shop`, in the order they were blocked. */
  readonly blocked: readonly string[];
}

let seeded: Seeded | undefined;
const ready = (async (): Promise<Seeded> => {
  const database = await migratedDatabase('browser');
  const store = await openPostgresStore(database.runtimeUrl);
  const world = { runStore: store.runStore, repository: store.dispatchRepository } as unknown as SeedWorld;
  const grants = new PostgresGrantAdministration(database.owner);
  for (const project of ['shop', 'batch'])
    await grants.writeGrant({ subject: 'viewer', projectId: project, permission: 'run.read' }, 'test-owner');
  // shop: 40 blocked (three kinds of refusal), 3 dispatched, 1 retrying; batch: one retrying only.
  const blocked: string[] = [];
  for (let index = 0; index < 40; index += 1)
    blocked.push((await settledRun(world, 'shop', REFUSALS[index % REFUSALS.length] ?? 'invalid')).runId);
  // Stopped jobs end: their attempts are no longer running.
  for (let index = 0; index < 3; index += 1) {
    const { runId } = await settledRun(world, 'shop', 'termination_requested');
    await store.runStore.markTerminal({
      runId,
      status: 'cancelled',
      attemptId: `${runId}-a1`,
      eventId: `evt-end-${runId}`,
    });
  }
  await settledRun(world, 'shop', 'handle_missing', 60_000);
  await settledRun(world, 'batch', 'controller_missing', 60_000);
  const certificates = makeCertificates();
  const plane = await startControlPlane({
    databaseUrl: database.runtimeUrl,
    tls: { cert: certificates.server.cert, key: certificates.server.key, ca: certificates.ca.cert },
  });
  seeded = { database, store, certificates, plane, blocked };
  return seeded;
})();
ready.catch(() => undefined);
test.after.always(async () => {
  await seeded?.plane.close();
  await seeded?.store.close();
  seeded?.certificates.remove();
  await seeded?.database.dispose();
});

/** A fresh profile in a fresh --user-data-dir, presenting `cn`'s certificate to the plane; JavaScript off. */
async function browserAs(
  t: import('ava').ExecutionContext,
  { plane, certificates }: Seeded,
  cn: string,
): Promise<Page> {
  const pem = certificates.client(cn);
  const profile = mkdtempSync(path.join(tmpdir(), 'pidfence-chromium-'));
  const context: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: ensureChromium(),
    headless: true,
    args: CHROMIUM_FLAGS,
    javaScriptEnabled: false,
    viewport: { width: 1000, height: 900 },
    // The plane's server certificate is of the test CA, which this profile does not know.
    ignoreHTTPSErrors: true,
    clientCertificates: [{ origin: plane.url, cert: Buffer.from(pem.cert), key: Buffer.from(pem.key) }],
  });
  t.teardown(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  return context.pages()[0] ?? context.newPage();
}

/** Follows the `Next 16` links from the page shown now; the link texts of `rows` on each page. */
async function walkPages(
  page: Page,
  rows: string,
  onPage: (shown: readonly string[], number: number) => Promise<void> = async () => undefined,
): Promise<string[][]> {
  const pages: string[][] = [];
  for (;;) {
    const shown = (await page.locator(rows).allTextContents()).map((text) => text.trim());
    pages.push(shown);
    await onPage(shown, pages.length);
    if ((await page.locator('[data-link="next"]').count()) === 0) return pages;
    await page.click('[data-link="next"]');
  }
}

const fact = async (page: Page, name: string): Promise<string> =>
  (await page.locator(`[data-fact="${name}"]`).first().textContent())?.trim() ?? '';

test.serial(
  'the card shows the assessment and every count pidfence status gives, without JavaScript; a screenshot is saved',
  async (t) => {
    const world = await ready;
    const page = await browserAs(t, world, 'viewer');
    const summary = await new ManagementPlane({ store: world.store.managementStore, principal: 'viewer' }).summary(
      'shop',
    );
    t.is(summary.assessment, 'attention_required');

    const response = await page.goto(`${world.plane.url}/status/projects/shop`);
    t.is(response?.status(), 200);
    t.is(await page.locator('[data-fact="assessment"]').getAttribute('data-value'), 'attention_required');
    t.is(await fact(page, 'assessment'), 'attention required');
    t.is(await fact(page, 'principal'), 'viewer');
    for (const state of DISPATCH_STATUSES)
      t.is(await fact(page, `state-${state}`), String(summary.states[state]), state);
    for (const result of BLOCKING_RESULTS)
      t.is(await fact(page, `blocked-by-${result}`), String(summary.blockingResults[result]), result);
    t.is(await fact(page, 'overdue'), String(summary.overdue));
    t.is(await fact(page, 'running'), String(summary.running));
    t.is(await fact(page, 'run-ended'), String(summary.runEnded));
    t.deepEqual(
      [summary.states.blocked, summary.states.dispatched, summary.states.retry_wait, summary.running],
      [40, 3, 1, 41],
    );

    mkdirSync(SCREENSHOTS, { recursive: true });
    const shot = path.join(SCREENSHOTS, 'status-card.png');
    await page.screenshot({ path: shot, fullPage: true });
    const png = readFileSync(shot);
    t.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');
    t.true(png.length > 10_000, `a real picture (${png.length} bytes)`);

    // The form, without a script: another project's card, converging.
    await page.goto(`${world.plane.url}/status`);
    await page.fill('input[name="project"]', 'batch');
    await page.click('button');
    await page.waitForURL(/\/status\/projects\/batch$/);
    t.is(await page.locator('[data-fact="assessment"]').getAttribute('data-value'), 'converging');
  },
);

test.serial(
  'the blocked drill-down pages 40 blocked runs as 16 + 16 + 8 by its links, in the order and with the cursor of pidfence blocked',
  async (t) => {
    const world = await ready;
    const page = await browserAs(t, world, 'viewer');
    await page.goto(`${world.plane.url}/status/projects/shop`);
    await page.click('[data-link="blocked"]');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'blocked.png'), fullPage: true });
    const pages = await walkPages(page, 'tr[data-row="blocked"] a', async (_shown, number) => {
      t.is(await fact(page, 'page'), String(number));
    });
    const seen = pages.flat();
    t.deepEqual(
      pages.map((shown) => shown.length),
      [16, 16, 8],
    );
    t.is(await fact(page, 'last-page'), 'last page');
    t.deepEqual(seen, world.blocked, 'every blocked run once, oldest first');

    // The same walk through the management plane's cursor API gives the same pages.
    const plane = new ManagementPlane({ store: world.store.managementStore, principal: 'viewer' });
    const walked: string[][] = [];
    for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
      const blockedPage = await plane.blockedPage('shop', cursor);
      walked.push(blockedPage.items.map((item) => item.runId));
      cursor = blockedPage.next ?? undefined;
    }
    t.deepEqual(walked.flat(), seen);

    // The last run of the last page, drilled into: its dispatch, and the exact rearm for it.
    const last = seen[seen.length - 1] ?? '';
    await page.click(`a:text-is("${last}")`);
    t.is(await fact(page, 'dispatch-status'), 'blocked');
    t.regex(
      await page.content(),
      new RegExp(
        `pidfence rearm ${last} --expect-version 2 --expect-result ${REFUSALS[(seen.length - 1) % REFUSALS.length] ?? ''}`,
      ),
    );
    t.notRegex(await page.content(), /\b(pid|token|digest|owner|argv)\b/i);
  },
);

test.serial(
  "the run list pages the project's runs 16 at a time, newest first, as pidfence list does; the state filter is a plain form",
  async (t) => {
    const world = await ready;
    const page = await browserAs(t, world, 'viewer');
    await page.goto(`${world.plane.url}/status/projects/shop`);
    await page.click('[data-link="runs"]');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'runs.png'), fullPage: true });
    const plane = new ManagementPlane({ store: world.store.managementStore, principal: 'viewer' });
    let cursor: string | undefined;
    const pages = await walkPages(page, 'tr[data-row="run"] a', async (shown, number) => {
      const listed = await plane.listRuns({
        projectId: 'shop',
        limit: 16,
        ...(cursor === undefined ? {} : { cursor }),
      });
      t.deepEqual(
        shown,
        listed.items.map((item) => item.runId),
        `page ${number} is the list's page`,
      );
      cursor = listed.next ?? undefined;
    });
    t.deepEqual(
      pages.map((shown) => shown.length),
      [16, 16, 12],
      '44 runs: 40 blocked, 3 stopped, 1 retrying',
    );
    t.is(new Set(pages.flat()).size, 44);
    t.is(cursor, undefined, 'the last page has no next');

    await page.selectOption('select[name="state"]', 'cancelled');
    await page.click('form button');
    await page.waitForURL(/\/runs\?state=cancelled$/);
    t.is(await fact(page, 'state'), 'cancelled');
    t.deepEqual(
      await page
        .locator('td[data-status]')
        .evaluateAll((cells) => cells.map((cell) => cell.getAttribute('data-status'))),
      ['cancelled', 'cancelled', 'cancelled'],
    );
    await page.click('tr[data-row="run"] a >> nth=0');
    t.is(await fact(page, 'status'), 'cancelled');
    t.is(await fact(page, 'dispatch-status'), 'dispatched');
    t.notRegex(await page.content(), /\b(pid|token|digest|owner|argv)\b/i);
  },
);

test.serial('a subject without run.read sees the refusal, not the counts', async (t) => {
  const world = await ready;
  const page = await browserAs(t, world, 'stranger');
  const response = await page.goto(`${world.plane.url}/status/projects/shop`);
  t.is(response?.status(), 403);
  t.is(await fact(page, 'code'), 'ERR_PIDFENCE_NOT_PERMITTED');
  t.is(await page.locator('[data-fact^="state-"]').count(), 0);
});

/** The parts of a DOM element and its computed style the contrast check reads (this suite compiles without the DOM lib). */
interface Shown {
  readonly parentElement: Shown | null;
  readonly childNodes: ArrayLike<{ readonly nodeType: number; readonly textContent: string | null }>;
  readonly tagName: string;
  readonly className: string;
}
interface ShownStyle {
  readonly color: string;
  readonly backgroundColor: string;
  readonly fontSize: string;
  readonly fontWeight: string;
}

/** Every element's own text whose contrast with the background it sits on is below WCAG AA (4.5:1, 3:1 for large text). */
async function contrastFailures(page: Page): Promise<string[]> {
  return page.locator('body *').evaluateAll((elements) => {
    const styleOf = (element: Shown): ShownStyle =>
      (globalThis as unknown as { getComputedStyle(element: Shown): ShownStyle }).getComputedStyle(element);
    const rgba = (color: string): number[] =>
      (/rgba?\(([^)]+)\)/.exec(color)?.[1] ?? '0,0,0,0').split(',').map((part) => Number(part.trim()));
    const luminance = ([r = 0, g = 0, b = 0]: number[]): number => {
      const channel = (value: number): number =>
        value / 255 <= 0.03928 ? value / 255 / 12.92 : ((value / 255 + 0.055) / 1.055) ** 2.4;
      return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    };
    const backgroundOf = (element: Shown): number[] => {
      for (let at: Shown | null = element; at !== null; at = at.parentElement) {
        const color = rgba(styleOf(at).backgroundColor);
        if ((color[3] ?? 1) > 0) return color;
      }
      return [255, 255, 255, 1];
    };
    const failures: string[] = [];
    for (const element of elements as unknown as Shown[]) {
      const text = Array.from(element.childNodes)
        .filter((node) => node.nodeType === 3)
        .map((node) => node.textContent?.trim() ?? '')
        .join('');
      if (text === '') continue;
      const style = styleOf(element);
      const [high, low] = [luminance(rgba(style.color)), luminance(backgroundOf(element))].sort((a, b) => b - a);
      const ratio = ((high ?? 0) + 0.05) / ((low ?? 0) + 0.05);
      const size = Number.parseFloat(style.fontSize);
      const minimum = size >= 24 || (Number(style.fontWeight) >= 700 && size >= 18.66) ? 3 : 4.5;
      if (ratio < minimum)
        failures.push(
          `<${element.tagName.toLowerCase()} class="${element.className}"> "${text.slice(0, 24)}": ${ratio.toFixed(2)}:1 < ${minimum}:1`,
        );
    }
    return failures;
  });
}

test.serial(
  "every page has its landmarks (header with the navigation, one main), keeps all its text at WCAG AA contrast, and a page of the store's state reloads itself without a script",
  async (t) => {
    const world = await ready;
    const page = await browserAs(t, world, 'viewer');
    const running =
      (
        await new ManagementPlane({ store: world.store.managementStore, principal: 'viewer' }).listRuns({
          projectId: 'shop',
          state: 'running',
          limit: 1,
        })
      ).items[0]?.runId ?? '';
    const pages: ReadonlyArray<readonly [string, boolean]> = [
      ['/status', false],
      ['/status/projects/shop', true],
      ['/status/projects/shop/blocked', true],
      ['/status/projects/shop/runs', true],
      [`/status/runs/${running}`, true],
      ['/status/projects/nowhere-of-yours/blocked', false],
    ];
    for (const [at, reloads] of pages) {
      await page.goto(`${world.plane.url}${at}`);
      t.is(await page.locator('main').count(), 1, `${at}: one main`);
      t.is(await page.locator('header > nav').count(), 1, `${at}: the navigation in the header`);
      t.is(await page.locator('html').getAttribute('lang'), 'en');
      t.deepEqual(await contrastFailures(page), [], `${at}: every text at AA contrast`);
      t.is(
        await page.locator('meta[http-equiv="refresh"]').count(),
        reloads ? 1 : 0,
        `${at}: ${reloads ? 'reloads itself' : 'stays as it is (a form, a refusal)'}`,
      );
    }
    t.true((await page.content()).includes('ERR_PIDFENCE_'), 'the last page is a refusal');
    // The refresh is the browser's own: with JavaScript off the card is fetched again by itself.
    await page.goto(`${world.plane.url}/status/projects/shop`);
    t.is(await page.locator('meta[http-equiv="refresh"]').getAttribute('content'), '15');
    t.regex(await fact(page, 'refresh'), /reloads itself every 15 s/);
    const again = await page.waitForRequest((request) => request.url() === `${world.plane.url}/status/projects/shop`, {
      timeout: 30_000,
    });
    t.is(again.method(), 'GET');
  },
);
