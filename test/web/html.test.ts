// The `html` tagged template (docs/decisions/0230): every value is text unless it is another
// template's result; a value may stand only between elements or inside a quoted attribute value.
import test from 'ava';

import { html, Html, renderPage } from '../../lib/web/html';

const HOSTILE = `x"><script>alert(1)</script><img src=x onerror=alert(2)>' onmouseover='y' &amp;`;

test('a string value is text: in an element and in a quoted attribute, nothing of it becomes markup', (t) => {
  const markup = html`<p title="${HOSTILE}">${HOSTILE}</p><b title='${HOSTILE}'>x</b>`.toString();
  t.false(markup.includes('<script'));
  t.false(markup.includes('<img'));
  t.is(markup.split('<').length - 1, 4, "only the template's own four tags");
  t.is(markup, `<p title="${escaped(HOSTILE)}">${escaped(HOSTILE)}</p><b title='${escaped(HOSTILE)}'>x</b>`);
});

test("markup goes in only as another template's result; a list goes in item by item; numbers are text", (t) => {
  const cell = html`<td>${'<i>'}</td>`;
  const rows = [1, 2].map((n) => html`<tr data-n="${n}">${cell}</tr>`);
  const escapedCell = '<td>&#60;i&#62;</td>';
  t.is(
    html`<table>${rows}</table>`.toString(),
    `<table><tr data-n="1">${escapedCell}</tr><tr data-n="2">${escapedCell}</tr></table>`,
  );
  t.is(html`<p>${['a<', html`<br>`, 3]}</p>`.toString(), '<p>a&#60;<br>3</p>');
});

test('something that only looks like markup is refused: an object with a toString, null, undefined, NaN', (t) => {
  const lookalike = { toString: () => '<script>alert(1)</script>' } as unknown as Html;
  const error = t.throws(() => html`<p>${lookalike}</p>`, { instanceOf: TypeError });
  t.regex(error?.message ?? '', /cannot place a object/);
  for (const value of [null, undefined, Number.NaN, Number.POSITIVE_INFINITY, true]) {
    t.throws(() => html`<p>${value as unknown as string}</p>`, { instanceOf: TypeError }, String(value));
  }
});

test('a value in a tag outside quotes is refused before anything renders: it could add an attribute escaping never touches', (t) => {
  const attribute = 'onmouseover=alert(1)';
  const refused = { instanceOf: TypeError, message: /in a tag outside quotes/ };
  t.throws(() => html`<a href=${attribute}>x</a>`, refused);
  t.throws(() => html`<option value="a" ${attribute}>x</option>`, refused);
  t.throws(() => html`<input ${attribute}>`, refused);
  t.notThrows(() => html`<a href="/x">${attribute}</a><p>a > b</p>`);
});

test('markup is refused inside an attribute value, where its quotes would end the value', (t) => {
  const markup = html`<b class="x">`;
  t.throws(() => html`<a title="${markup}">x</a>`, { instanceOf: TypeError, message: /inside an attribute value/ });
});

test('the page frame escapes its title and places navigation and content as markup', (t) => {
  const page = renderPage(200, HOSTILE, html`<nav>${HOSTILE}</nav>`, html`<p>${HOSTILE}</p>`);
  t.true(page.body.includes(`<title>${escaped(HOSTILE)} · pidfence</title>`));
  t.true(page.body.includes(`<header><nav>${escaped(HOSTILE)}</nav></header>`));
  t.true(page.body.includes(`<main>\n<p>${escaped(HOSTILE)}</p>\n</main>`));
  t.false(page.body.includes('<script'));
});

function escaped(value: string): string {
  return value.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}
