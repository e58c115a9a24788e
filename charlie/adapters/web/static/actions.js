// @ts-check
// What a person can do with one message, as the conversation draws it: copy it; regenerate
// Charlie's last reply; page through a message's alternatives (the replies regenerated in
// its place, the versions of an edited message); edit their own message and send it again;
// retry a turn that failed; forget it for good. The controls are drawn here, and
// messageActions decides which of them apply to each message and carries them out (an answer
// asked for streams into the chat as every other does, through chat.js).

import { enc, messageStream, post } from './api.js';
import { copyText, h, toast } from './dom.js';
import { icon } from './icons.js';

const COPIED_MS = 1500; // how long the Copy button shows that it copied

/** A button showing only an icon: `label` is its accessible name and its tooltip. */
export function iconButton(name, label, onclick, { disabled = false, className = '' } = {}) {
  return h(
    'button',
    {
      type: 'button',
      class: `icon-button ${className}`.trim(),
      'aria-label': label,
      title: label,
      disabled,
      onclick,
    },
    icon(name),
  );
}

/**
 * The actions under a message. `message` is the API's message (`content`, `role`, `id`,
 * `alternatives`); `can` says which apply ({edit, regenerate, retry, forget, busy}: while a
 * reply streams, everything but Copy waits); `on` holds the handlers ({edit(), regenerate(),
 * retry(), forget(), choose(id)}).
 */
export function messageToolbar(message, can, on) {
  const bar = h('div', { class: 'msg-actions', role: 'group', 'aria-label': 'Message actions' });
  const pager = alternativesPager(message, can.busy, on.choose); // first: it is always shown
  if (pager) bar.append(pager);
  const copy = iconButton('copy', 'Copy message', () => copyMessage(message.content, copy), {
    className: 'msg-copy',
  });
  bar.append(copy);
  if (can.edit) {
    bar.append(iconButton('edit', 'Edit message', on.edit, { disabled: can.busy }));
  }
  if (can.regenerate) {
    bar.append(iconButton('again', 'Regenerate reply', on.regenerate, { disabled: can.busy }));
  }
  if (can.retry) {
    bar.append(retryButton(on.retry, can.busy));
  }
  if (can.forget) {
    bar.append(
      iconButton('forget', 'Forget this message for good', on.forget, {
        disabled: can.busy,
        className: 'msg-forget',
      }),
    );
  }
  return bar;
}

/**
 * Whether a failed forget was done all the same: the messages are gone, and only the search
 * index is still to be scrubbed (by itself), or they had been forgotten already.
 */
export function forgottenAnyway(error) {
  return error.kind === 'ForgetUnfinished' || error.kind === 'AlreadyForgotten';
}

/** What forgetting did, in words: "Forgot 2 messages; 1 quote left the memory." */
export function forgottenText(done) {
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  let text = `Forgot ${plural(done.messages, 'message')}`;
  if (done.quotes) text += `; ${plural(done.quotes, 'quote')} left the memory`;
  text += '.';
  if (done.restated) {
    text += ` ${plural(done.restated, 'decision')} only restated it and went with it.`;
  }
  if (done.flagged && done.flagged.length) {
    text +=
      ` ${plural(done.flagged.length, 'decision')} came only from it: flagged in the memory ` +
      'for you to keep or drop.';
  }
  return text;
}

/** "Retry": answer the person's last message again, after its turn failed. */
export function retryButton(onclick, disabled = false) {
  return h(
    'button',
    {
      type: 'button',
      class: 'button-small msg-retry',
      'aria-label': 'Retry: answer your last message again',
      disabled,
      onclick,
    },
    icon('again'),
    ' Retry',
  );
}

/** "‹ 2/3 ›" on a message with alternatives; null when it has none. */
function alternativesPager(message, busy, choose) {
  const ids = message.alternatives;
  if (!Array.isArray(ids) || ids.length < 2) return null;
  const at = ids.indexOf(message.id);
  if (at < 0) return null;
  const what = message.role === 'user' ? 'version' : 'reply';
  return h(
    'span',
    {
      class: 'msg-pager',
      role: 'group',
      'aria-label': `${what[0].toUpperCase()}${what.slice(1)} ${at + 1} of ${ids.length}`,
    },
    iconButton('previous', `Previous ${what}`, () => choose(ids[at - 1]), {
      disabled: busy || at === 0,
    }),
    h('span', { class: 'msg-pager-count', 'aria-hidden': 'true' }, `${at + 1}/${ids.length}`),
    iconButton('next', `Next ${what}`, () => choose(ids[at + 1]), {
      disabled: busy || at === ids.length - 1,
    }),
  );
}

/**
 * An inline editor for the person's own message: Save & send (or Enter) calls
 * `save(text)`, Cancel (or Escape) calls `cancel()`. Returns {element, focus()}.
 */
export function editForm(text, { save, cancel }) {
  const area = h('textarea', {
    class: 'msg-edit-input',
    'aria-label': 'Edit your message',
    rows: Math.min(8, Math.max(2, text.split('\n').length)),
  });
  area.value = text;
  const form = h(
    'form',
    { class: 'msg-edit', novalidate: true },
    area,
    h(
      'div',
      { class: 'msg-edit-actions' },
      h(
        'button',
        { type: 'button', class: 'button-small button-quiet', onclick: cancel },
        'Cancel',
      ),
      h('button', { type: 'submit', class: 'button-small button-primary' }, 'Save & send'),
    ),
  );
  const submit = () => {
    const words = area.value.trim();
    if (!words) {
      toast('The message is empty: type something to send.', 'error');
      area.focus();
      return;
    }
    save(words);
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit();
  });
  area.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') {
      event.preventDefault();
      event.stopPropagation();
      cancel();
    } else if (event.key === 'Enter' && !event.shiftKey && !event.altKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  return {
    element: form,
    focus() {
      area.focus();
      area.setSelectionRange(area.value.length, area.value.length);
    },
  };
}

/** Copy `text` to the clipboard, showing on `button` that it did. */
export async function copyMessage(text, button) {
  const copied = await copyText(text, button);
  if (!copied) {
    toast('This browser would not copy the message: select it and press Ctrl+C (⌘C).', 'error');
    return false;
  }
  button.replaceChildren(icon('check'));
  button.setAttribute('aria-label', 'Copied');
  button.classList.add('copied');
  toast('Message copied.');
  setTimeout(() => {
    button.replaceChildren(icon('copy'));
    button.setAttribute('aria-label', 'Copy message');
    button.classList.remove('copied');
  }, COPIED_MS);
  return true;
}

// ------------------------------------------------------------ carrying them out

/**
 * The chat shown, as its messages' actions see it: its elements, where it stands now, and
 * what the actions ask of it.
 * @typedef {object} ActionsChat
 * @property {HTMLElement} list the messages shown
 * @property {HTMLElement} scroller what scrolls them
 * @property {HTMLElement} status the live region saying what just happened
 * @property {WeakMap<Element, any>} shown each message's <li> → the message as the API gave it
 * @property {string | null} channel
 * @property {number | null} thread null: a new chat, not started yet
 * @property {number} generation bumps on every thread switch, so late answers are dropped
 * @property {boolean} streaming an answer is streaming in (everything but Copy waits)
 * @property {boolean} starting a message is about to go: its chat is being looked up or made
 * @property {boolean} viewingEarlier the list shows messages around one found, not the latest
 * @property {(open: (signal: AbortSignal) => AsyncIterable<{event: string, data: any}>,
 *   options?: object) => Promise<import('./chat.js').Turn>} converse stream an answer in
 * @property {(turn: import('./chat.js').Turn, options?: object) => Promise<void>} settle the
 *   conversation as the server has it after an answer
 * @property {() => Promise<void>} reopen show the thread again, its latest messages read anew
 * @property {(messages: any[]) => void} showLatest show `messages`, the thread's latest
 * @property {() => void} changed the chats list hears that the thread was written
 */

/** Whether an answer was refused before it started: the server changed nothing. */
function refused({ streamed, error }) {
  return Boolean(error) && error.name !== 'AbortError' && !streamed;
}

/**
 * The actions of the messages in `chat`: `update()` draws each message's controls as they
 * apply now; `answerAgain(target, replacing)` asks for a new answer (a Retry does too).
 * @param {object} app the app (user, isPrivate, online, reportError)
 * @param {ActionsChat} chat
 */
export function messageActions(app, chat) {
  const { list, scroller, status, shown } = chat;

  /** `/api/channels/…/threads/…/messages/<id>/<verb>` in the thread shown. */
  const messagePath = (id, verb) =>
    `/api/channels/${enc(chat.channel)}/threads/${chat.thread}/messages/${enc(id)}/${verb}`;

  /** Each message's actions as they apply now: after the list changes, or a reply streams. */
  function update() {
    const items = [...list.children].filter(
      (item) => item.classList.contains('msg') && !item.hasAttribute('aria-busy'),
    );
    const last = items[items.length - 1];
    const busy = chat.streaming;
    for (const item of items) {
      item.querySelector(':scope > .msg-actions')?.remove();
      const message = shown.get(item);
      if (!message || !message.id || item.classList.contains('msg-editing')) continue;
      const mine = message.role === 'user' && message.speaker === app.user.name;
      const newest = item === last && !chat.viewingEarlier;
      const can = {
        busy,
        edit: mine,
        regenerate: message.role === 'assistant' && newest,
        retry: mine && newest, // your message with no answer: its turn failed
        forget: mine || app.isPrivate(chat.channel), // the server says no to anyone else's
      };
      const on = {
        edit: () => startEdit(item),
        regenerate: () => answerAgain(message.id, item),
        retry: () => answerAgain(message.id, null),
        forget: () => forgetMessage(message),
        choose: (id) => choose(id, item),
      };
      item.append(messageToolbar(message, can, on));
    }
  }

  /**
   * A new answer: in place of reply `target` (regenerate), or to the person's unanswered
   * last message `target` (retry). `replacing` is what the new answer takes the place of
   * (the old reply, or the error of the failed turn), or null to add it at the end.
   */
  async function answerAgain(target, replacing) {
    if (chat.streaming || chat.starting || !chat.channel || chat.thread === null) return;
    if (!app.online()) {
      toast("You're offline: nothing was sent.", 'error');
      return;
    }
    const to = { channel: chat.channel, thread: chat.thread };
    const open = (signal) =>
      messageStream(to.channel, to.thread, target, 'regenerate', {}, signal);
    const replaced = replacing && shown.has(replacing) ? replacing : null;
    const result = await chat.converse(open, { replacing });
    await chat.settle(result, { replaced });
  }

  /** Your message as an editor in its place, to change and send again. */
  function startEdit(item) {
    const message = shown.get(item);
    if (!message || chat.streaming || item.classList.contains('msg-editing')) return;
    const body = item.querySelector('.msg-body');
    const editor = editForm(message.content, {
      save: (text) => resend(item, message, text),
      cancel() {
        editor.element.remove();
        item.classList.remove('msg-editing');
        body.hidden = false;
        update();
        item.querySelector('.msg-actions [aria-label="Edit message"]')?.focus();
      },
    });
    item.classList.add('msg-editing');
    item.querySelector(':scope > .msg-actions')?.remove();
    body.hidden = true;
    body.after(editor.element);
    editor.focus();
  }

  // Your message `message`, now saying `text`, sent again: the turns after it stay on the
  // server as a branch of their own, a page back through the message's versions.
  async function resend(item, message, text) {
    if (chat.streaming || chat.starting || chat.thread === null) return;
    if (!app.online()) {
      toast("You're offline: the message was not sent.", 'error');
      return;
    }
    item.querySelector(':scope > .msg-edit')?.remove();
    item.classList.remove('msg-editing');
    const body = item.querySelector('.msg-body');
    body.hidden = false;
    const later = [];
    while (item.nextElementSibling) {
      later.push(item.nextElementSibling);
      item.nextElementSibling.remove();
    }
    body.textContent = text;
    shown.delete(item);
    item.dataset.id = '';
    const to = { channel: chat.channel, thread: chat.thread };
    const open = (signal) =>
      messageStream(to.channel, to.thread, message.id, 'edit', { text }, signal);
    const result = await chat.converse(open);
    if (result.current && refused(result)) {
      result.reply.item.remove(); // nothing changed on the server: as it was
      body.textContent = message.content;
      item.dataset.id = message.id;
      shown.set(item, message);
      item.after(...later);
      toast(`The message could not be sent again: ${result.error.message}`, 'error');
      update();
      return;
    }
    await chat.settle(result, { asked: { item, text } });
  }

  /** Forget a message for good (a person's message with Charlie's answer to it). */
  async function forgetMessage(message) {
    if (chat.streaming || chat.thread === null) return;
    const answer = message.role === 'user' ? " and Charlie's answer to it" : '';
    const sure = window.confirm(
      `Forget this message${answer} for good? It leaves the conversation, the memory's ` +
        'quotes, recall and later exports. This cannot be undone.',
    );
    if (!sure) return;
    let done;
    try {
      done = await post(messagePath(message.id, 'forget'), {});
    } catch (error) {
      if (!forgottenAnyway(error)) {
        app.reportError(error, 'The message could not be forgotten');
        return;
      }
      done = null;
      toast(error.message, 'error'); // said in full: what was done, what is left, by whom
    }
    if (done) toast(forgottenText(done));
    await chat.reopen();
    chat.changed();
  }

  /** Show alternative `id` (a page through a message's versions) and the turns after it. */
  async function choose(id, item) {
    if (chat.streaming || chat.thread === null) return;
    const mine = chat.generation;
    const offset = item.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
    let messages;
    try {
      messages = await post(messagePath(id, 'choose'), {});
    } catch (error) {
      app.reportError(error, 'That version could not be shown');
      return;
    }
    if (mine !== chat.generation) return;
    chat.showLatest(messages);
    const items = /** @type {HTMLElement[]} */ ([...list.children]);
    const now = items.find((each) => each.dataset.id === String(id));
    if (now) {
      const moved = now.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
      scroller.scrollTop += moved - offset; // the message stays where it was on screen
      const button = /** @type {HTMLElement | null} */ (
        now.querySelector('.msg-pager button:not(:disabled)')
      );
      button?.focus({ preventScroll: true });
      const count = now.querySelector('.msg-pager')?.getAttribute('aria-label');
      status.textContent = count ? `Showing ${count.toLowerCase()}.` : 'Showing that version.';
    }
    chat.changed();
  }

  return { update, answerAgain };
}
