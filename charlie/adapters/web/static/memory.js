// @ts-check
// The memory panel: Summary, Decisions and Recent quotes, each editable in place; the
// history of revisions as readable diffs, with undo. What just happened to the memory (saved,
// restored, updated from the conversation) is told in the panel's own line, never in a toast
// floating over its decisions; on a phone showing the conversation, the Memory tab is marked.

import { enc, get, post, put } from './api.js';
import { $, h, when } from './dom.js';
import { showHtml } from './markdown.js';

const SECTIONS = [
  { key: 'summary', title: 'Summary', hint: 'A paragraph or two: what this is about.' },
  { key: 'decisions', title: 'Decisions', hint: 'One decision per line.' },
  { key: 'quotes', title: 'Recent quotes', hint: 'One per line, as “speaker: words said”.' },
];

function sourceLabel(source) {
  if (source === 'distill') return 'Distilled by Charlie';
  if (source === 'edit') return 'Edited here';
  if (source === 'hand_edit') return 'Edited by hand in memory.md';
  if (source === 'initial') return 'Created';
  const undo = /^undo:(\d+)$/.exec(source || '');
  if (undo) return `Restored revision ${undo[1]}`;
  return source || 'Changed';
}

function asText(memory, key) {
  if (key === 'summary') return memory.summary || '';
  if (key === 'decisions') return (memory.decisions || []).map((d) => d.text).join('\n');
  return (memory.quotes || []).map((q) => `${q.speaker}: ${q.text}`).join('\n');
}

function lines(text) {
  return text
    .split('\n')
    .map((line) => line.trim().replace(/^[-*+]\s+/, ''))
    .filter(Boolean);
}

function parseQuotes(text, defaultSpeaker) {
  return lines(text).map((line) => {
    const colon = line.indexOf(':');
    const speaker = colon > 0 && colon <= 60 ? line.slice(0, colon).trim() : defaultSpeaker;
    let words = colon > 0 && colon <= 60 ? line.slice(colon + 1).trim() : line;
    if (/^".*"$/.test(words) || /^“.*”$/.test(words)) words = words.slice(1, -1);
    return { speaker, text: words };
  });
}

/** Where a decision came from, in words: "since 2 Nov · distilled from messages 12, 14". */
export function provenance(decision) {
  const parts = [];
  if (decision.since) parts.push(`since ${decision.since}`);
  if (decision.until) parts.push(`until ${decision.until}`);
  const sources = decision.sources || [];
  const from = sources.length
    ? ` from message${sources.length > 1 ? 's' : ''} ${sources.join(', ')}`
    : '';
  if (decision.by === 'distilled') parts.push(`distilled${from}`);
  else if (decision.by === 'hand') parts.push(`written by hand${from}`);
  else if (decision.by) parts.push(`by ${decision.by}${from}`);
  else if (from) parts.push(from.trim());
  if (decision.changed_by) parts.push(`changed by message ${decision.changed_by}`);
  return parts.join(' · ');
}

function decisionItem(decision) {
  return h(
    'li',
    { title: provenance(decision) },
    h('span', { class: 'decision-text' }, decision.text),
    h('span', { class: 'provenance small muted' }, provenance(decision)),
    decision.flag ? h('span', { class: 'badge badge-guard' }, decision.flag) : null,
  );
}

function earlierItem(decision) {
  return h(
    'li',
    { title: provenance(decision) },
    h('s', { class: 'decision-text' }, decision.text),
    h('span', { class: 'provenance small muted' }, provenance(decision)),
  );
}

export function createMemory(app) {
  const sections = $('#memory-sections');
  const where = $('#memory-where');
  const errorBox = $('#memory-error');
  const historyToggle = $('#memory-history-toggle');
  const historyBox = $('#memory-history');
  const historyList = $('#history-list');
  const undoButton = $('#memory-undo');
  const news = $('#memory-news');
  const memoryTab = $('#show-memory');

  let channel = null;
  /** @type {import('./api-types.js').MemoryFile | import('./api-types.js').MemoryOut | null} */
  let current = null;
  let editing = null; // the key of the section being edited
  let generation = 0;

  function render() {
    const memory = current || { summary: '', decisions: [], quotes: [] };
    const error = 'error' in memory ? memory.error : null;
    errorBox.hidden = !error;
    errorBox.textContent = error
      ? `Charlie can't read this memory: ${error}. Fix the file; distillation is paused until then.`
      : '';
    sections.replaceChildren(...SECTIONS.map((section) => sectionElement(section, memory)));
  }

  function sectionElement(section, memory) {
    const headingId = `memory-${section.key}-heading`;
    const box = h('section', {
      class: 'memory-section',
      id: `memory-${section.key}`,
      'aria-labelledby': headingId,
    });
    const editButton = h(
      'button',
      {
        type: 'button',
        class: 'button-small button-quiet',
        'aria-label': `Edit ${section.title.toLowerCase()}`,
        onclick: () => startEdit(section.key),
      },
      'Edit',
    );
    box.append(
      h(
        'div',
        { class: 'memory-section-head' },
        h('h3', { id: headingId }, section.title),
        editing ? null : editButton,
      ),
    );
    if (editing === section.key) {
      box.append(editor(section, memory));
      return box;
    }
    box.append(display(section.key, memory));
    return box;
  }

  function display(key, memory) {
    if (key === 'summary') {
      return memory.summary
        ? showHtml(h('div', { class: 'md' }), memory.summary_html)
        : h(
            'p',
            { class: 'empty small' },
            'Nothing yet. Charlie writes a summary as the conversation goes on, or write one yourself.',
          );
    }
    if (key === 'decisions') {
      const held = memory.decisions && memory.decisions.length
        ? h('ul', { class: 'decisions' }, memory.decisions.map(decisionItem))
        : h('p', { class: 'empty small' }, 'No decisions yet.');
      const earlier = memory.superseded || [];
      if (!earlier.length) return held;
      return h(
        'div',
        {},
        held,
        h(
          'details',
          { class: 'earlier-decisions' },
          h('summary', { class: 'small' }, `Earlier decisions (${earlier.length})`),
          h('ul', { class: 'decisions earlier' }, earlier.map(earlierItem)),
        ),
      );
    }
    return memory.quotes && memory.quotes.length
      ? h(
          'ul',
          { class: 'quotes' },
          memory.quotes.map((q) =>
            h(
              'li',
              {},
              h('q', {}, q.text),
              h('span', { class: 'quote-speaker' }, ` — ${q.speaker}`),
            ),
          ),
        )
      : h('p', { class: 'empty small' }, 'No quotes yet.');
  }

  function editor(section, memory) {
    const id = `memory-edit-${section.key}`;
    const field = h('textarea', {
      id,
      rows: section.key === 'summary' ? 6 : 5,
      'aria-describedby': `${id}-hint`,
    });
    field.value = asText(memory, section.key);
    const cancel = () => {
      editing = null;
      render();
      sections.querySelector(`#memory-${section.key} button`)?.focus();
    };
    const form = h(
      'form',
      { class: 'memory-editor' },
      h('label', { for: id, class: 'visually-hidden' }, section.title),
      field,
      h(
        'p',
        { class: 'hint', id: `${id}-hint` },
        `${section.hint} Ctrl+Enter saves, Escape cancels.`,
      ),
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'button-primary button-small' }, 'Save'),
        h(
          'button',
          { type: 'button', class: 'button-quiet button-small', onclick: cancel },
          'Cancel',
        ),
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      save(section.key, field.value, form);
    });
    field.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        cancel();
      } else if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    queueMicrotask(() => field.focus());
    return form;
  }

  function startEdit(key) {
    editing = key;
    render();
  }

  async function save(key, text, form) {
    const memory = current || { summary: '', decisions: [], quotes: [] };
    const body = {
      summary: memory.summary || '',
      decisions: (memory.decisions || []).map((d) => d.text),
      quotes: memory.quotes || [],
    };
    if (key === 'summary') body.summary = text.trim();
    if (key === 'decisions') body.decisions = lines(text);
    if (key === 'quotes') body.quotes = parseQuotes(text, app.user.name);
    for (const button of form.querySelectorAll('button')) button.disabled = true;
    try {
      current = await put(`/api/channels/${enc(channel)}/memory`, body);
      editing = null;
      render();
      tell('Memory saved.');
      sections.querySelector(`#memory-${key} button`)?.focus();
      if (!historyBox.hidden) loadHistory();
    } catch (error) {
      for (const button of form.querySelectorAll('button')) button.disabled = false;
      app.reportError(error, 'The memory could not be saved');
    }
  }

  // ------------------------------------------------------------ history

  function diffElement(diff) {
    if (!diff || !diff.trim()) return h('p', { class: 'muted small' }, 'No change in the text.');
    const pre = h('pre', { class: 'diff', tabindex: '0', 'aria-label': 'Changes' });
    for (const line of diff.split('\n')) {
      if (line.startsWith('+++') || line.startsWith('---')) continue;
      if (!line.slice(1).trim()) continue; // blank lines, kept or changed, are only spacing
      let kind = 'same';
      if (line.startsWith('@@')) kind = 'hunk';
      else if (line.startsWith('+')) kind = 'add';
      else if (line.startsWith('-')) kind = 'del';
      if (kind === 'hunk' && !pre.childNodes.length) continue;
      if (kind === 'hunk') {
        // "@@ -13,4 +13,4 @@" means little to a person: a gap marker says the same.
        pre.append(h('span', { class: 'diff-hunk', title: line }, '⋯\n'));
        continue;
      }
      const label = { add: 'added: ', del: 'removed: ' }[kind];
      pre.append(
        h(
          'span',
          { class: `diff-${kind}` },
          label ? h('span', { class: 'visually-hidden' }, label) : null,
          `${line}\n`,
        ),
      );
    }
    return pre;
  }

  async function loadHistory() {
    const mine = generation;
    historyList.replaceChildren(h('li', { class: 'muted small' }, 'Loading history…'));
    try {
      const revisions = await get(`/api/channels/${enc(channel)}/memory/history`);
      if (mine !== generation) return;
      undoButton.disabled = revisions.length < 2;
      if (!revisions.length) {
        historyList.replaceChildren(
          h('li', { class: 'empty small' }, 'No revisions yet: the memory has never been written.'),
        );
        return;
      }
      historyList.replaceChildren(
        ...revisions.map((revision, index) =>
          h(
            'li',
            { class: 'revision', dataset: { id: revision.id } },
            h(
              'div',
              { class: 'revision-head' },
              h('strong', {}, sourceLabel(revision.source)),
              h(
                'span',
                { class: 'muted small' },
                ` · #${revision.id} · `,
                h('time', { datetime: revision.created_at }, when(revision.created_at)),
              ),
              index === 0
                ? h('span', { class: 'badge badge-current' }, 'current')
                : h(
                    'button',
                    {
                      type: 'button',
                      class: 'button-small button-quiet',
                      onclick: () => undo(revision.id),
                    },
                    'Restore this version',
                  ),
            ),
            diffElement(revision.diff),
          ),
        ),
      );
    } catch (error) {
      if (mine !== generation) return;
      historyList.replaceChildren(
        h('li', {}, app.errorText(error, 'The history could not be loaded')),
      );
    }
  }

  async function undo(to = null) {
    try {
      current = await post(`/api/channels/${enc(channel)}/memory/undo`, { to });
      editing = null;
      render();
      tell(to === null ? 'Undone: the previous version is back.' : `Revision ${to} restored.`);
      loadHistory();
    } catch (error) {
      app.reportError(error, 'Undo failed');
    }
  }

  historyToggle.addEventListener('click', () => {
    const open = historyBox.hidden;
    historyBox.hidden = !open;
    historyToggle.setAttribute('aria-expanded', String(open));
    historyToggle.textContent = open ? 'Hide history' : 'History';
    if (open) loadHistory();
  });
  undoButton.addEventListener('click', () => undo(null));

  // ------------------------------------------------------------ loading

  async function refresh() {
    const mine = generation;
    try {
      /** @type {import('./api-types.js').MemoryFile} */
      const memory = await get(`/api/channels/${enc(channel)}/memory`);
      if (mine !== generation) return;
      current = memory;
      if (!editing) render();
      if (!historyBox.hidden) loadHistory();
    } catch (error) {
      if (mine !== generation) return;
      sections.replaceChildren(app.errorText(error, 'The memory could not be loaded'));
    }
  }

  /** Say what just happened to the memory, in the panel's line (it stays until the next). */
  function tell(text) {
    news.textContent = `${text} (${when(new Date().toISOString())})`;
    news.hidden = false;
  }

  // The Memory tab of a phone's chat, marked while the memory changed out of sight.
  function markTab(marked) {
    memoryTab.classList.toggle('updated', marked);
    memoryTab.querySelector('.tab-news')?.remove();
    if (marked) {
      const hidden = h('span', { class: 'visually-hidden' }, ' (updated)');
      memoryTab.append(h('span', { class: 'tab-news' }, hidden));
    }
  }
  memoryTab.addEventListener('click', () => markTab(false));

  function open(nextChannel) {
    channel = nextChannel;
    generation += 1;
    current = null;
    editing = null;
    news.hidden = true;
    markTab(false);
    where.textContent = app.isPrivate(channel)
      ? 'Kept only in Charlie’s database and visible to you alone.'
      : `projects/${channel}/memory.md: edit it here or in any editor; your edits win.`;
    sections.replaceChildren(h('p', { class: 'muted small' }, 'Loading memory…'));
    historyBox.hidden = true;
    historyToggle.setAttribute('aria-expanded', 'false');
    historyToggle.textContent = 'History';
    return refresh();
  }

  /** A `distilled` event arrived: the conversation was folded into the memory. */
  async function distilled() {
    await refresh();
    const pane = $('#memory-pane');
    pane.classList.remove('flash');
    void pane.offsetWidth; // restart the highlight animation
    pane.classList.add('flash');
    tell('Memory updated from the conversation.');
    if (!pane.getClientRects().length) markTab(true); // the conversation is shown instead
  }

  return { open, refresh, distilled };
}
