// Server-rendered HTML of the status page (docs/decisions/0111): the `html` tagged template that
// escapes every interpolated value (docs/decisions/0230), one page frame with its inline style, and the
// headers every page carries. No script is served and the policy allows none.

/** Text and attribute values: the five characters that could leave their context. */
function escapeText(value: string | number): string {
  return String(value).replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/** What a template may place between its markup: text, a number, markup, or a list of them. */
export type HtmlValue = HtmlItem | readonly HtmlItem[];
type HtmlItem = string | number | Html;

/** Where a value stands in its template: between elements, or inside a quoted attribute value. */
type Slot = 'text' | 'attribute';
/** Where a browser reading a template's text is: between elements, in a tag, in a quoted value. */
type ReadState = 'text' | 'tag' | '"' | "'";

/**
 * Markup. Only the `html` tagged template makes one, from the template's own text, so markup is
 * what the code wrote literally and every value placed in between is text. No call turns a string
 * into markup (docs/decisions/0230).
 */
export class Html {
  readonly #markup: string;

  private constructor(markup: string) {
    this.#markup = markup;
  }

  toString(): string {
    return this.#markup;
  }

  /** `html` below. A static method, so the constructor stays private to this class. */
  static template(this: void, strings: TemplateStringsArray, ...values: readonly HtmlValue[]): Html {
    const slots = slotsOf(strings);
    let markup = strings[0] ?? '';
    values.forEach((value, index) => {
      const slot = slots[index] ?? 'text';
      const items: readonly HtmlItem[] = Array.isArray(value) ? value : [value as HtmlItem];
      for (const item of items) markup += valueMarkup(item, slot);
      markup += strings[index + 1] ?? '';
    });
    return new Html(markup);
  }
}

/**
 * The tagged template: `html\`<td>${runId}</td>\`` escapes `runId`; a value that is itself `Html`
 * (another template's result) goes in as markup; a list goes in item by item, so `rows.map(...)`
 * needs no join. A value may stand between elements or inside a quoted attribute value, nowhere else.
 */
export const html = Html.template;

function valueMarkup(value: HtmlItem, slot: Slot): string {
  if (value instanceof Html) {
    if (slot === 'attribute') throw new TypeError('html: markup cannot go inside an attribute value; pass text');
    return value.toString();
  }
  if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) return escapeText(value);
  // A bug, not input: the types allow nothing else, and "undefined" on a page helps no one.
  throw new TypeError(`html: cannot place a ${value === null ? 'null' : typeof value} in a page`);
}

/** Each template's slots, worked out once: a call site keeps its strings array for the process's life. */
const SLOTS = new WeakMap<TemplateStringsArray, readonly Slot[]>();

/**
 * Reads the template's own text as a browser would (text, inside a tag, inside a quoted value) and
 * says where each value stands. A value inside a tag but outside quotes could add an attribute such
 * as `onclick=…` using no character that escaping touches, so it is refused the first time the
 * template is used.
 */
function slotsOf(strings: TemplateStringsArray): readonly Slot[] {
  const known = SLOTS.get(strings);
  if (known !== undefined) return known;
  const slots: Slot[] = [];
  let state: ReadState = 'text';
  strings.forEach((text, index) => {
    for (let at = 0; at < text.length; at += 1) state = nextState(state, text, at);
    if (index === strings.length - 1) return;
    if (state === 'tag') {
      const before = text.slice(-24);
      throw new TypeError(`html: a value after "${before}" stands in a tag outside quotes; quote the attribute value`);
    }
    slots.push(state === 'text' ? 'text' : 'attribute');
  });
  SLOTS.set(strings, slots);
  return slots;
}

function nextState(state: ReadState, text: string, at: number): ReadState {
  const character = text[at];
  if (state === 'text') return character === '<' && /[a-zA-Z!/]/.test(text[at + 1] ?? '') ? 'tag' : 'text';
  if (state === 'tag') return character === '>' ? 'text' : character === '"' || character === "'" ? character : 'tag';
  return character === state ? 'tag' : state;
}

/** An epoch-ms time as the reader sees it (UTC, to the second), with the number in a tooltip. */
export function renderTime(ms: number | null): Html {
  if (ms === null) return html`<span class="none">–</span>`;
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}" title="${ms}">${iso.replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC')}</time>`;
}

export interface HtmlReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** No script, no frames, no outside resources; nothing is cached or referred. */
const PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
});

const STYLE = html`
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #1d2330; background: #f7f8fa; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; } h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
nav { font-size: .9rem; margin-bottom: 1.25rem; } nav a { margin-right: 1rem; }
a { color: #1f5fbf; } .muted { color: #5b6475; font-size: .9rem; } .none { color: #687080; }
.card { background: #fff; border: 1px solid #dde1e8; border-radius: 10px; padding: 1.25rem 1.5rem; box-shadow: 0 1px 2px rgba(0,0,0,.04); }
.assessment { display: inline-block; font-weight: 600; padding: .2rem .7rem; border-radius: 999px; margin: .5rem 0; }
.clear { background: #e3f5e9; color: #17612f; } .converging { background: #fff3d6; color: #7a5300; } .attention_required { background: #fde4e4; color: #9b1c1c; }
.grid { display: flex; gap: .75rem; flex-wrap: wrap; margin: .75rem 0; }
.count { flex: 1 1 7rem; border: 1px solid #e6e9ef; border-radius: 8px; padding: .5rem .75rem; background: #fbfcfd; }
.count b { display: block; font-size: 1.5rem; } .count span { color: #5b6475; font-size: .85rem; }
table { border-collapse: collapse; width: 100%; background: #fff; } th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #e6e9ef; }
th { font-size: .85rem; color: #5b6475; font-weight: 600; } .n { text-align: right; font-variant-numeric: tabular-nums; }
.pager { margin: 1rem 0; display: flex; gap: 1rem; align-items: center; }
form input { font: inherit; padding: .3rem .5rem; } form button { font: inherit; padding: .3rem .8rem; }
time, td:first-child { white-space: nowrap; }
code { background: #eef1f5; padding: .1rem .3rem; border-radius: 4px; font-size: .85rem; }
`;

/** How often a page that shows the store's state reloads itself: by `<meta http-equiv="refresh">`, no script (docs/decisions/0227). */
export const PAGE_REFRESH_SECONDS = 15;

/**
 * One page: the navigation in its `<header>`, the rest in `<main>` (landmarks for assistive
 * technology), and, for a page of the store's state (a 200 that asks for it), a reload every
 * PAGE_REFRESH_SECONDS that says so at the foot of the page. Every part is `html` (docs/decisions/0230).
 */
export function renderPage(
  status: number,
  title: string,
  navigation: Html | null,
  main: Html,
  options: { readonly refresh?: boolean } = {},
): HtmlReply {
  const refresh = status === 200 && options.refresh !== false;
  const reload = refresh ? html`<meta http-equiv="refresh" content="${PAGE_REFRESH_SECONDS}">` : '';
  const header =
    navigation === null
      ? ''
      : html`<header>${navigation}</header>
`;
  const footer = refresh
    ? html`<footer><p class="muted" data-fact="refresh">This page reloads itself every ${PAGE_REFRESH_SECONDS} s.</p></footer>
`
    : '';
  const body = html`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${reload}<title>${title} · pidfence</title><style>${STYLE}</style></head>
<body>
${header}<main>
${main}
</main>
${footer}</body>
</html>
`.toString();
  return { status, headers: PAGE_HEADERS, body };
}

export function redirectTo(location: string): HtmlReply {
  return { status: 303, headers: { ...PAGE_HEADERS, location }, body: '' };
}
