// Markdown on the page, two ways.
//
// Replies: the server renders them (charlie/render.py: tables, highlighted code, task
// lists…) and cleans the HTML against an allow-list; `showReply` puts that HTML in place —
// the one place the app parses an HTML string — and gives each code block a Copy button.
// While a reply streams, chat.js shows its words as plain text until the HTML arrives.
//
// Notes and memory: `renderMarkdown`, a small renderer that is safe by construction: it
// builds DOM nodes and puts every piece of text in a Text node, so HTML in a note is shown
// as typed, never run. Supported: fenced code blocks, inline code, headings, paragraphs
// (line breaks kept), bullet and numbered lists (nested), block quotes, rules, bold,
// italic, strikethrough, and links whose address is http(s) only — anything else stays
// plain text.

import { copyText, h, toast } from './dom.js';

const COPIED_MS = 2000; // how long a Copy button says "Copied"

/**
 * Show `message` (an API message) in `body`: its server-rendered `html` when it has one,
 * else its words as plain text. Returns `body`.
 */
export function showReply(body, message) {
  if (typeof message.html === 'string') {
    body.classList.remove('plain');
    body.innerHTML = message.html; // cleaned by the server against an allow-list
    addCopyButtons(body);
  } else {
    body.classList.add('plain');
    body.textContent = message.content ?? '';
  }
  return body;
}

/** A bar with the code's language and a Copy button above each <pre> in `root`. */
export function addCopyButtons(root) {
  for (const pre of root.querySelectorAll('pre')) {
    if (pre.parentElement.classList.contains('code-block')) continue;
    const language = pre.dataset.language || '';
    const button = h(
      'button',
      {
        type: 'button',
        class: 'copy-code',
        'aria-label': language ? `Copy the ${language} code` : 'Copy the code',
      },
      'Copy',
    );
    button.addEventListener('click', () => copyCode(pre, button));
    const block = h('div', { class: 'code-block' });
    pre.replaceWith(block);
    block.append(h('div', { class: 'code-bar' }, h('span', {}, language), button), pre);
  }
}

async function copyCode(pre, button) {
  const text = pre.textContent;
  const copied = await copyText(text, button);
  if (!copied) {
    selectText(pre);
    toast('This browser would not copy: the code is selected, press Ctrl+C (⌘C).', 'error');
    return;
  }
  button.textContent = 'Copied';
  button.classList.add('copied');
  setTimeout(() => {
    button.textContent = 'Copy';
    button.classList.remove('copied');
  }, COPIED_MS);
}

function selectText(element) {
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}>[ ]?(.*)$/;
const ITEM = /^([ \t]*)(?:([-*+])|(\d{1,9})[.)])[ \t]+(.*)$/;

const MAX_DEPTH = 8;

/** Markdown text → a DocumentFragment of safe nodes. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text ?? '')
    .replace(/\r\n?/g, '\n')
    .split('\n');
  renderBlocks(lines, fragment, 0);
  return fragment;
}

function indentOf(line) {
  const match = line.match(/^[ \t]*/)[0];
  return match.replace(/\t/g, '    ').length;
}

function matchItem(line) {
  const match = line.match(ITEM);
  if (!match) return null;
  const indent = indentOf(match[1]);
  const marker = match[2] || `${match[3]}.`;
  return {
    indent,
    ordered: !match[2],
    number: match[3] ? Number(match[3]) : 1,
    text: match[4],
    contentIndent: indent + marker.length + 1,
  };
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line);
}

function renderBlocks(lines, parent, depth) {
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) parent.append(h('p', {}, inlineLines(paragraph)));
    paragraph = [];
  };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let match;
    if (!line.trim()) {
      flush();
      i += 1;
    } else if ((match = line.match(FENCE))) {
      flush();
      i = renderFence(lines, i, match, parent);
    } else if ((match = line.match(HEADING))) {
      flush();
      const level = match[1].length;
      // Inside a message, a "#" heading is a section of that message: h3 and below.
      parent.append(
        h(`h${Math.min(level + 2, 6)}`, { class: `md-h${level}` }, inline(match[2] || '')),
      );
      i += 1;
    } else if (RULE.test(line)) {
      flush();
      parent.append(h('hr'));
      i += 1;
    } else if (QUOTE.test(line) && depth < MAX_DEPTH) {
      flush();
      const inner = [];
      while (i < lines.length && (match = lines[i].match(QUOTE))) {
        inner.push(match[1]);
        i += 1;
      }
      const quote = h('blockquote');
      renderBlocks(inner, quote, depth + 1);
      parent.append(quote);
    } else if (matchItem(line) && depth < MAX_DEPTH) {
      flush();
      i = renderList(lines, i, parent, depth);
    } else {
      paragraph.push(line.trim());
      i += 1;
    }
  }
  flush();
}

function renderFence(lines, start, match, parent) {
  const marker = match[1];
  const language = match[2].replace(/[^\w+#.-]/g, '');
  const body = [];
  let i = start + 1;
  const closing = new RegExp(`^ {0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`);
  while (i < lines.length && !closing.test(lines[i])) {
    body.push(lines[i]);
    i += 1;
  }
  // An unclosed fence runs to the end of the text.
  const code = h('code', language ? { class: `language-${language}` } : {}, body.join('\n'));
  const pre = h('pre', language ? { 'data-language': language } : {}, code);
  parent.append(pre);
  return i + 1;
}

function renderList(lines, start, parent, depth) {
  const first = matchItem(lines[start]);
  const list = h(first.ordered ? 'ol' : 'ul');
  if (first.ordered && first.number !== 1) list.setAttribute('start', String(first.number));
  parent.append(list);
  const sibling = (item) => item && item.indent < first.indent + 2;
  let itemLines = null;
  let contentIndent = first.contentIndent;
  let loose = false;
  const finish = () => {
    if (itemLines) list.append(renderItem(itemLines, depth, loose));
  };
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const item = matchItem(line);
    if (sibling(item)) {
      if (item.ordered !== first.ordered) break; // another kind of list begins
      finish();
      itemLines = [item.text];
      contentIndent = item.contentIndent;
      i += 1;
    } else if (!line.trim()) {
      let next = i + 1;
      while (next < lines.length && !lines[next].trim()) next += 1;
      const after = next < lines.length ? lines[next] : null;
      const nextItem = after === null ? null : matchItem(after);
      const continues =
        after !== null &&
        ((sibling(nextItem) && nextItem.ordered === first.ordered) ||
          indentOf(after) >= first.indent + 2);
      if (!continues) break;
      itemLines.push('');
      loose = true;
      i += 1;
    } else if (indentOf(line) >= first.indent + 2) {
      itemLines.push(dedent(line, contentIndent));
      i += 1;
    } else if (itemLines[itemLines.length - 1] !== '' && !startsBlock(line)) {
      itemLines.push(line.trim()); // a lazy continuation of the item's paragraph
      i += 1;
    } else {
      break;
    }
  }
  finish();
  return i;
}

function dedent(line, width) {
  let removed = 0;
  let at = 0;
  while (at < line.length && removed < width && (line[at] === ' ' || line[at] === '\t')) {
    removed += line[at] === '\t' ? 4 : 1;
    at += 1;
  }
  return line.slice(at);
}

function renderItem(itemLines, depth, loose) {
  const li = h('li');
  renderBlocks(itemLines, li, depth + 1);
  const firstChild = li.firstElementChild;
  if (!loose && firstChild && firstChild.tagName === 'P')
    firstChild.replaceWith(...firstChild.childNodes);
  return li;
}

// ---------------------------------------------------------------- inline

const INLINE = new RegExp(
  [
    /(`+)((?:[^`]|(?!\1)`)+?)\1(?!`)/.source, // 1, 2: code span
    /\[([^\]\n]+)\]\(\s*<?([^\s()<>]+(?:\([^\s()<>]*\)[^\s()<>]*)*)>?(?:\s+"[^"\n]*")?\s*\)/.source, // 3, 4
    /\*\*(?=\S)([\s\S]*?\S)\*\*/.source, // 5: bold
    /(?<![\p{L}\p{N}_])__(?=\S)([\s\S]*?\S)__(?![\p{L}\p{N}_])/.source, // 6: bold
    /\*(?=[^\s*])((?:[^*]|\*\*[^*]+\*\*)*?[^\s*])\*(?!\*)/.source, // 7: italic
    /(?<![\p{L}\p{N}_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\p{L}\p{N}_])/.source, // 8: italic
    /~~(?=\S)([\s\S]*?\S)~~/.source, // 9: strikethrough
    /(https?:\/\/[^\s<>"'`]+)/.source, // 10: a bare web address
    /\\([!-/:-@[-`{-~])/.source, // 11: a backslash escape
  ].join('|'),
  'gu',
);

/** An http(s) address, or null: every other scheme (javascript:, data:, …) is refused. */
function safeUrl(raw) {
  if (!/^https?:\/\//i.test(raw)) return null;
  try {
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

function link(url, children) {
  return h('a', { href: url, target: '_blank', rel: 'noopener noreferrer nofollow' }, children);
}

function trimUrl(url) {
  let end = url.length;
  for (;;) {
    const last = url[end - 1];
    if ('.,;:!?*_\'"'.includes(last)) end -= 1;
    else if (last === ')') {
      const body = url.slice(0, end);
      if ((body.match(/\(/g) || []).length < (body.match(/\)/g) || []).length) end -= 1;
      else break;
    } else break;
  }
  return url.slice(0, end);
}

/** Inline markdown → an array of nodes. `links: false` inside a link's own text. */
function inline(text, { links = true } = {}) {
  const nodes = [];
  let plain = '';
  const pushText = () => {
    if (plain) nodes.push(document.createTextNode(plain));
    plain = '';
  };
  const pattern = new RegExp(INLINE.source, INLINE.flags);
  let last = 0;
  let match;
  while ((match = pattern.exec(text))) {
    plain += text.slice(last, match.index);
    last = pattern.lastIndex;
    const [whole] = match;
    if (match[1] !== undefined) {
      let code = match[2];
      if (/^ .*[^ ].* $/s.test(code)) code = code.slice(1, -1);
      pushText();
      nodes.push(h('code', {}, code));
    } else if (match[3] !== undefined) {
      const url = links ? safeUrl(match[4]) : null;
      pushText();
      if (url) nodes.push(link(url, inline(match[3], { links: false })));
      else nodes.push(...inline(match[3], { links: false })); // not http(s): text only
    } else if (match[5] !== undefined || match[6] !== undefined) {
      pushText();
      nodes.push(h('strong', {}, inline(match[5] ?? match[6], { links })));
    } else if (match[7] !== undefined || match[8] !== undefined) {
      pushText();
      nodes.push(h('em', {}, inline(match[7] ?? match[8], { links })));
    } else if (match[9] !== undefined) {
      pushText();
      nodes.push(h('del', {}, inline(match[9], { links })));
    } else if (match[10] !== undefined) {
      const address = trimUrl(match[10]);
      last = match.index + address.length;
      pattern.lastIndex = last;
      const url = links ? safeUrl(address) : null;
      if (url) {
        pushText();
        nodes.push(link(url, address));
      } else plain += address;
    } else if (match[11] !== undefined) {
      plain += match[11];
    } else {
      plain += whole;
    }
  }
  plain += text.slice(last);
  pushText();
  return nodes;
}

function inlineLines(lines) {
  const nodes = [];
  lines.forEach((line, index) => {
    if (index) nodes.push(h('br'));
    nodes.push(...inline(line));
  });
  return nodes;
}
