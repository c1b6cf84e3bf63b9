// Server-rendered HTML of the status page (docs/decisions/0111): escaping, one page frame with its
// inline style, and the headers every page carries. No script is served and the policy allows none,
// so every page works, and is tested, without JavaScript.

/** Text and attribute values: the five characters that could leave their context. */
export function escapeHtml(value: string | number): string {
  return String(value).replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/** An epoch-ms time as the reader sees it (UTC, to the second), with the number in a tooltip. */
export function renderTime(ms: number | null): string {
  if (ms === null) return '<span class="none">–</span>';
  return `<time datetime="${new Date(ms).toISOString()}" title="${ms}">${new Date(ms).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC')}</time>`;
}

export interface HtmlReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** No script, no frames, no outside resources; nothing is cached or referred. */
const PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
});

const STYLE = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #1d2330; background: #f7f8fa; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; } h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
nav { font-size: .9rem; margin-bottom: 1.25rem; } nav a { margin-right: 1rem; }
a { color: #1f5fbf; } .muted { color: #5b6475; font-size: .9rem; } .none { color: #9aa1ad; }
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

export function renderPage(status: number, title: string, content: string): HtmlReply {
  const body = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)} · pidfence</title><style>${STYLE}</style></head>
<body>
${content}
</body>
</html>
`;
  return { status, headers: PAGE_HEADERS, body };
}

export function redirectTo(location: string): HtmlReply {
  return { status: 303, headers: { ...PAGE_HEADERS, location }, body: '' };
}
