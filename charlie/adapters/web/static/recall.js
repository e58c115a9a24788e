// @ts-check
// Find in conversation: what was said, found again in every chat of this channel (or, when
// asked, in every shared project too), each hit with its date, the chat it is in when that
// is not the one shown, and the words that matched marked. Choosing a hit opens its chat
// and shows it there among the messages around it (chat.showMessage).

import { enc, get, query } from './api.js';
import { $, clear, h, plural } from './dom.js';

const LIMIT = 10;
const SYNTAX = /[\\^$.*+?()[\]{}|/]/g; // characters a RegExp reads as syntax

/** "2023-05-08T13:56:00+00:00" → "8 May 2023, 14:56" (the person's own time zone). */
export function fullDate(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso || '');
  const day = date.toLocaleDateString([], { day: 'numeric', month: 'short', year: 'numeric' });
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return `${day}, ${time}`;
}

/**
 * `text` as strings and <mark> elements: each word that starts with one of `terms` (the
 * words the server searched for) is marked. Only text nodes are made, never HTML.
 */
export function marked(text, terms) {
  const words = [...new Set(terms.map((term) => term.toLowerCase()))]
    .filter((term) => term.length > 1)
    .sort((a, b) => b.length - a.length)
    .map((term) => term.replace(SYNTAX, '\\$&'));
  if (!words.length) return [text];
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${words.join('|')})[\\p{L}\\p{N}]*`, 'giu');
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    parts.push(text.slice(last, match.index), h('mark', {}, match[0]));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts.filter((part) => part !== '');
}

export function createRecall(app, chat, threads) {
  const toggle = $('#recall-toggle');
  const panel = $('#recall-panel');
  const form = $('#recall-form');
  const input = $('#recall-input');
  const everywhere = $('#recall-all');
  const statusLine = $('#recall-status');
  const results = $('#recall-results');

  let generation = 0;
  let jumpingTo = null; // the channel a chosen hit is opening: its results stay shown

  function setOpen(open) {
    panel.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    if (open) input.focus();
  }

  function reset() {
    generation += 1;
    clear(results);
    statusLine.textContent = '';
  }

  /** Where a hit was said, when that is not the chat shown: its channel, or its chat. */
  function whereSaid(hit) {
    const where = hit.project || 'private';
    if (where !== chat.channel) return `in ${app.channelName(where)}`;
    if (hit.thread === undefined || hit.thread === null || hit.thread === chat.thread) return '';
    const title = threads.titleOf(hit.thread);
    return title ? `in “${title}”` : 'in another chat';
  }

  function hitItem(hit, terms) {
    const elsewhere = whereSaid(hit);
    return h(
      'li',
      { class: 'recall-hit', dataset: { id: hit.message_id } },
      h(
        'button',
        { type: 'button', class: 'recall-jump', title: hit.why, onclick: () => jump(hit) },
        h(
          'span',
          { class: 'recall-meta' },
          h('time', { datetime: hit.time }, fullDate(hit.time)),
          h('span', { class: 'speaker' }, hit.speaker),
          elsewhere ? h('span', { class: 'recall-where' }, elsewhere) : null,
        ),
        h('span', { class: 'recall-text' }, marked(hit.text, terms)),
      ),
    );
  }

  function render(found, where) {
    clear(results);
    const about = found.when ? `About ${found.when}. ` : '';
    if (!found.results.length) {
      statusLine.textContent = `${about}Nothing found in ${where}.`;
      return;
    }
    const count = plural(found.results.length, 'message');
    statusLine.textContent = `${about}${count} found in ${where}.`;
    results.append(...found.results.map((hit) => hitItem(hit, found.terms || [])));
  }

  async function search() {
    const q = input.value.trim();
    const channel = chat.channel;
    if (!channel) return;
    reset();
    if (!q) {
      statusLine.textContent = 'Type some words to look for.';
      input.focus();
      return;
    }
    const mine = generation;
    const all = everywhere.checked;
    const where = all ? 'this channel and every shared project' : app.channelName(channel);
    statusLine.textContent = 'Looking…';
    try {
      const params = query({ q, limit: LIMIT, all: all ? 'true' : '' });
      const found = await get(`/api/channels/${enc(channel)}/recall${params}`);
      if (mine === generation) render(found, where);
    } catch (error) {
      if (mine !== generation) return;
      statusLine.textContent = '';
      statusLine.append(app.errorText(error, 'The search failed'));
    }
  }

  function jump(hit) {
    const where = hit.project || 'private';
    const thread = hit.thread ?? null;
    if (window.matchMedia('(max-width: 760px)').matches) setOpen(false); // room for the chat
    chat.showMessage(where, hit.message_id, thread);
    if (where === chat.channel && (thread === null || thread === chat.thread)) return;
    if (where !== chat.channel) jumpingTo = where;
    app.navigate('chat', where, thread === null ? null : String(thread));
  }

  toggle.addEventListener('click', () => setOpen(panel.hidden));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    search();
  });
  panel.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') {
      setOpen(false);
      toggle.focus();
    }
  });

  return {
    /** The chat now shows `channel`: results from elsewhere go, unless a hit opened it. */
    follow(channel) {
      if (channel !== jumpingTo) reset();
      jumpingTo = null;
    },
  };
}
