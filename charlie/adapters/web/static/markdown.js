// @ts-check
// Markdown on the page: the server renders every piece of it — replies, notes, the memory's
// summary — with one renderer (charlie/adapters/web/render.py: tables, highlighted code,
// task lists…) and cleans the HTML against one allow-list. `showHtml` puts that HTML in
// place — the one place the app parses an HTML string — and gives each code block a Copy
// button. While a reply streams, chat.js shows its words as plain text until the HTML
// arrives. Search snippets arrive as plain words (the server takes the markup out).

import { copyText, h, toast } from './dom.js';

const COPIED_MS = 2000; // how long a Copy button says "Copied"

/**
 * Show `message` (an API message) in `body`: its server-rendered `html` when it has one,
 * else its words as plain text. Returns `body`.
 */
export function showReply(body, message) {
  if (typeof message.html === 'string') {
    body.classList.remove('plain');
    showHtml(body, message.html);
  } else {
    body.classList.add('plain');
    body.textContent = message.content ?? '';
  }
  return body;
}

/** Put `html`, rendered and cleaned by the server, into `element`, with Copy buttons. */
export function showHtml(element, html) {
  element.innerHTML = html; // cleaned by the server against an allow-list
  addCopyButtons(element);
  return element;
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
