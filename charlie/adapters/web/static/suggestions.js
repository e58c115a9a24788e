// @ts-check
// Suggested notes under a reply: accept (pin the note into the next answers' context, with
// an Unpin to take it back) or dismiss, each note with why it was suggested.

import { api, enc, post } from './api.js';
import { h } from './dom.js';

/**
 * The "Related notes you might want" box of one reply.
 * @param {object} app the app (openNote, reportError)
 * @param {string} channel the channel the reply was in: a pin belongs to it
 * @param {Array<{id: number, note: string, title: string, why: string, detail?: string}>} items
 */
export function suggestionBox(app, channel, items) {
  const listEl = h('ul', { class: 'suggestion-list' });
  for (const suggestion of items) {
    const row = h('li', { class: 'suggestion', dataset: { id: suggestion.id } });
    const unpin = async (button) => {
      button.disabled = true;
      try {
        await api('DELETE', `/api/channels/${enc(channel)}/pins/${suggestion.note}`);
        row.replaceChildren(
          h('p', { class: 'decided decided-dismiss' }, `Unpinned “${suggestion.title}”.`),
        );
      } catch (error) {
        button.disabled = false;
        app.reportError(error, 'That note could not be unpinned');
      }
    };
    const decide = async (action) => {
      for (const button of row.querySelectorAll('button')) button.disabled = true;
      try {
        await post(`/api/suggestions/${enc(suggestion.id)}/${action}`);
        if (action === 'accept') {
          const unpinButton = h(
            'button',
            {
              type: 'button',
              class: 'button-small button-quiet',
              onclick: () => unpin(unpinButton),
            },
            'Unpin',
          );
          row.replaceChildren(
            h(
              'p',
              { class: 'decided decided-accept' },
              `Pinned “${suggestion.title}”: Charlie will keep it in mind for the next answers. `,
              unpinButton,
            ),
          );
        } else {
          row.replaceChildren(
            h('p', { class: 'decided decided-dismiss' }, `Dismissed “${suggestion.title}”.`),
          );
        }
      } catch (error) {
        for (const button of row.querySelectorAll('button')) button.disabled = false;
        app.reportError(error, 'That suggestion could not be saved');
      }
    };
    row.append(
      h(
        'div',
        { class: 'suggestion-text' },
        h(
          'button',
          { type: 'button', class: 'link-button', onclick: () => app.openNote(suggestion.note) },
          suggestion.title,
        ),
        h('span', { class: 'note-id muted small' }, ` ${suggestion.note}`),
        h('p', { class: 'why small muted' }, suggestion.why),
        suggestion.detail
          ? h(
              'details',
              { class: 'why-numbers small muted' },
              h('summary', {}, 'Show the numbers'),
              h('p', {}, suggestion.detail),
            )
          : null,
      ),
      h(
        'div',
        { class: 'suggestion-actions' },
        h(
          'button',
          { type: 'button', class: 'button-small', onclick: () => decide('accept') },
          'Accept',
        ),
        h(
          'button',
          {
            type: 'button',
            class: 'button-small button-quiet',
            onclick: () => decide('dismiss'),
          },
          'Dismiss',
        ),
      ),
    );
    listEl.append(row);
  }
  return h(
    'section',
    { class: 'suggestions', 'aria-label': 'Suggested notes' },
    h('p', { class: 'small suggestions-title' }, 'Related notes you might want'),
    listEl,
  );
}
