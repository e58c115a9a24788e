// @ts-check
// The chats of a channel. A project, and your private channel, each hold many conversations
// (threads) that all feed the one memory beside them. The list — a side panel on a wide
// screen, a drawer on a phone — shows each chat's title, when it was last written in and
// how it ends, the one shown marked. From it a chat is opened, renamed in place, archived,
// or put in the trash (with an Undo); it also shows the archived chats and the trash, from
// which a chat is restored. "New chat" is in the conversation's header, one click away.
//
// The chat shown is part of the address, #/chat/<channel>/<thread> (…/new for a chat not
// started yet: it is made when its first message is sent), so a reload or the Back button
// keeps it. app.js routes here; chat.js shows the thread and tells us of new and changed ones.

import { forgottenAnyway, forgottenText } from './actions.js';
import { api, enc, get, patch, post, query } from './api.js';
import { $, clear, h, toast, when } from './dom.js';
import { icon } from './icons.js';

const NEW = 'new'; // the address of a new chat
const WIDE = '(min-width: 1000px)'; // a side panel from here up, a drawer below
const CLOSED = 'charlie.threads-closed'; // the side panel, closed by the person
const UNDO_MS = 10_000;
const EMPTY = {
  active: 'No chats yet: New chat starts one.',
  archived: 'No archived chats.',
  trash: 'The trash is empty. Deleted chats wait here until you restore them.',
};

/** The thread an address names: an id, NEW, or undefined when it names none. */
function wantedThread(part) {
  if (part === NEW) return NEW;
  return /^\d+$/.test(part || '') ? Number(part) : undefined;
}

function panelClosed() {
  try {
    return localStorage.getItem(CLOSED) === '1';
  } catch {
    return false; // storage can be switched off: the panel starts open
  }
}

function keepPanelClosed(closed) {
  try {
    if (closed) localStorage.setItem(CLOSED, '1');
    else localStorage.removeItem(CLOSED);
  } catch {
    // Not kept: the panel starts open next time.
  }
}

export function createThreads(app, chat) {
  const layout = $('#chat-view');
  const pane = $('#threads-pane');
  const list = $('#thread-list');
  const statusLine = $('#threads-status');
  const toggle = $('#threads-toggle');
  const closeButton = $('#threads-close');
  const backdrop = $('#threads-backdrop');
  const newButton = $('#new-chat');
  const title = $('#thread-title');
  const viewButtons = [...pane.querySelectorAll('[data-threads-view]')];
  const wide = window.matchMedia(WIDE);
  toggle.append(icon('chats'));
  closeButton.append(icon('close'));
  newButton.prepend(icon('plus'));

  let channel = null;
  let current = null; // the thread shown: its id, or null for a new chat not started yet
  let view = 'active'; // which chats the list shows: active, archived or trash
  let listed = []; // the chats of `view`, as last fetched
  const known = new Map(); // id → thread, from every list fetched (for titles)
  let loads = 0; // bumps on every fetch of the list, so a late answer is dropped
  let focusComposer = false; // a new chat was asked for: the composer gets the focus
  let closeMenu = null; // closes the one chat menu open

  const threadsPath = (ch, id = null) =>
    `/api/channels/${enc(ch)}/threads${id === null ? '' : `/${enc(id)}`}`;

  // ------------------------------------------------------------ the panel or drawer

  function setOpen(open, { focus = false } = {}) {
    pane.hidden = !open;
    backdrop.hidden = !open || wide.matches;
    layout.classList.toggle('threads-open', open);
    toggle.setAttribute('aria-expanded', String(open));
    if (focus && open) (list.querySelector('[aria-current]') || viewButtons[0]).focus();
  }

  /** On a phone the drawer makes way for the conversation; a side panel stays. */
  function closeDrawer() {
    if (!wide.matches && !pane.hidden) setOpen(false);
  }

  toggle.addEventListener('click', () => {
    const open = pane.hidden;
    if (wide.matches) keepPanelClosed(!open);
    setOpen(open, { focus: open && !wide.matches });
  });
  closeButton.addEventListener('click', () => {
    if (wide.matches) keepPanelClosed(true);
    setOpen(false);
    toggle.focus();
  });
  backdrop.addEventListener('click', () => setOpen(false));
  pane.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !wide.matches) {
      setOpen(false);
      toggle.focus();
    }
  });
  wide.addEventListener('change', () => setOpen(wide.matches && !panelClosed()));
  setOpen(wide.matches && !panelClosed());

  // ------------------------------------------------------------ the list

  function showTitle() {
    const thread = current === null ? null : known.get(current);
    title.textContent = current === null ? 'New chat' : thread ? thread.title : '';
    title.title = title.textContent;
  }

  function showViews() {
    for (const button of viewButtons) {
      button.setAttribute('aria-pressed', String(button.dataset.threadsView === view));
    }
  }

  /** Fetch the chats of `view` and show them; resolves to them (null when it failed). */
  async function load() {
    loads += 1;
    const mine = loads;
    const ch = channel;
    const which = view;
    if (!listed.length) statusLine.textContent = 'Loading chats…';
    let threads;
    try {
      threads = await get(`${threadsPath(ch)}${query({ view: which })}`);
    } catch (error) {
      if (mine === loads) {
        statusLine.replaceChildren(app.errorText(error, 'The chats could not be loaded'));
      }
      return null;
    }
    for (const thread of threads) known.set(thread.id, thread);
    if (mine === loads) {
      listed = threads;
      render();
      showTitle();
      if (which === 'active' && current !== null && !known.has(current)) findTitle(current);
    }
    return threads;
  }

  function render() {
    if (closeMenu) closeMenu();
    /** @type {HTMLElement | null} */
    const row = list.contains(document.activeElement)
      ? document.activeElement.closest('.thread')
      : null;
    const focused = row?.dataset.id ?? null;
    clear(list);
    statusLine.textContent = listed.length ? '' : EMPTY[view];
    list.append(...listed.map(threadItem));
    if (focused) list.querySelector(`.thread[data-id="${focused}"] .thread-open`)?.focus();
  }

  function threadItem(thread) {
    const shown = thread.id === current && view !== 'trash';
    const item = h('li', {
      class: `thread${shown ? ' thread-current' : ''}`,
      dataset: { id: thread.id },
    });
    const summary = [
      h(
        'span',
        { class: 'thread-line' },
        h('span', { class: 'thread-name' }, thread.title),
        h('time', { datetime: thread.updated_at }, when(thread.updated_at)),
      ),
      h('span', { class: 'thread-snippet' }, thread.snippet || 'No messages yet'),
    ];
    if (view === 'trash') {
      item.append(
        h('div', { class: 'thread-open' }, summary),
        h(
          'button',
          {
            type: 'button',
            class: 'button-small thread-restore',
            'aria-label': `Restore “${thread.title}”`,
            onclick: () => restore(thread),
          },
          'Restore',
        ),
      );
      return item;
    }
    item.append(
      h(
        'button',
        {
          type: 'button',
          class: 'thread-open',
          'aria-current': shown ? 'true' : null,
          onclick: () => select(thread.id),
        },
        summary,
      ),
      threadMenu(thread, item),
    );
    return item;
  }

  // The "…" button of a chat and its menu: Rename, Archive (or Unarchive), Delete.
  function threadMenu(thread, item) {
    const more = h(
      'button',
      {
        type: 'button',
        class: 'icon-button thread-more',
        'aria-label': `Actions for “${thread.title}”`,
        title: 'Rename, archive or delete',
        'aria-expanded': 'false',
      },
      icon('more'),
    );
    const menu = h('div', { class: 'thread-menu', hidden: true });
    const close = () => {
      menu.hidden = true;
      more.setAttribute('aria-expanded', 'false');
      if (closeMenu === close) closeMenu = null;
    };
    const entry = (label, act, className = '') =>
      h(
        'button',
        {
          type: 'button',
          class: className,
          onclick: () => {
            close();
            act();
          },
        },
        label,
      );
    menu.append(
      entry('Rename', () => rename(thread, item)),
      entry(thread.archived ? 'Unarchive' : 'Archive', () => archive(thread, !thread.archived)),
      entry('Delete', () => remove(thread), 'danger'),
      entry('Forget for good', () => forgetThread(thread), 'danger'),
    );
    more.addEventListener('click', () => {
      if (!menu.hidden) {
        close();
        return;
      }
      if (closeMenu) closeMenu();
      menu.hidden = false;
      more.setAttribute('aria-expanded', 'true');
      closeMenu = close;
      menu.querySelector('button').focus();
    });
    menu.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.stopPropagation();
        close();
        more.focus();
      }
    });
    return h('div', { class: 'thread-tools' }, more, menu);
  }

  document.addEventListener('click', (event) => {
    const target = /** @type {Element} */ (event.target);
    if (closeMenu && !target.closest('.thread-tools')) closeMenu();
  });

  for (const button of viewButtons) {
    button.addEventListener('click', () => {
      view = button.dataset.threadsView;
      listed = [];
      clear(list);
      showViews();
      load();
    });
  }

  // ------------------------------------------------------------ what a person does

  function address(id) {
    return app.href('chat', channel, id === null ? NEW : String(id));
  }

  function select(id) {
    closeDrawer();
    app.navigate('chat', channel, String(id));
  }

  function newChat() {
    closeDrawer();
    if (current === null) {
      chat.focus(); // already a new chat
      return;
    }
    focusComposer = true;
    app.navigate('chat', channel, NEW);
  }
  newButton.addEventListener('click', newChat);

  /** The title as an input in place: Enter (or leaving it) saves, Escape keeps the old. */
  function rename(thread, item) {
    const opener = item.querySelector('.thread-open');
    const input = h('input', {
      class: 'thread-rename',
      'aria-label': `New title for “${thread.title}”`,
      maxlength: 500,
      autocomplete: 'off',
    });
    input.value = thread.title;
    const form = h('form', { class: 'thread-rename-form', novalidate: true }, input);
    opener.replaceWith(form);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const text = input.value.trim();
      if (!save || !text || text === thread.title) {
        form.replaceWith(opener);
        opener.focus();
        return;
      }
      input.disabled = true;
      const ch = channel;
      try {
        const saved = await patch(threadsPath(ch, thread.id), { title: text });
        known.set(saved.id, saved);
        if (ch !== channel) return;
        listed = listed.map((each) => (each.id === saved.id ? saved : each));
        render();
        showTitle();
        list.querySelector(`.thread[data-id="${saved.id}"] .thread-open`)?.focus();
        toast(`Renamed to “${saved.title}”.`);
      } catch (error) {
        app.reportError(error, 'The chat could not be renamed');
        form.replaceWith(opener);
        opener.focus();
      }
    };
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      finish(true);
    });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener('blur', () => finish(true));
  }

  /** Out of the list (or back into it), with an Undo. */
  async function archive(thread, archived) {
    const ch = channel;
    try {
      await patch(threadsPath(ch, thread.id), { archived });
    } catch (error) {
      app.reportError(error, archived ? 'The chat could not be archived' : 'Not unarchived');
      return;
    }
    const wasShown = thread.id === current;
    listed = listed.filter((each) => each.id !== thread.id);
    render();
    if (archived && wasShown) await openNewest();
    undoToast(
      archived ? `Archived “${thread.title}”.` : `“${thread.title}” is back in your chats.`,
      async () => {
        await patch(threadsPath(ch, thread.id), { archived: !archived });
        if (ch !== channel) return;
        if (wasShown) app.navigate('chat', ch, String(thread.id));
        await load();
      },
    );
  }

  /** Into the trash, with an Undo that restores it (and shows it again, if it was shown). */
  async function remove(thread) {
    const ch = channel;
    try {
      await api('DELETE', threadsPath(ch, thread.id));
    } catch (error) {
      app.reportError(error, 'The chat could not be deleted');
      return;
    }
    const wasShown = thread.id === current;
    listed = listed.filter((each) => each.id !== thread.id);
    render();
    if (wasShown) await openNewest();
    undoToast(`Moved “${thread.title}” to the trash.`, async () => {
      await post(`${threadsPath(ch, thread.id)}/restore`);
      if (ch !== channel) return;
      if (wasShown) app.navigate('chat', ch, String(thread.id));
      await load();
    });
  }

  /** Forget a whole chat for good: its messages leave the memory's quotes, recall and
   * exports too; no Undo (the server keeps no copy). */
  async function forgetThread(thread) {
    const ch = channel;
    const sure = window.confirm(
      `Forget “${thread.title}” for good? Its messages leave the conversation, the memory's ` +
        'quotes, recall and later exports. This cannot be undone.',
    );
    if (!sure) return;
    let done;
    try {
      done = await post(`${threadsPath(ch, thread.id)}/forget`, {});
    } catch (error) {
      if (!forgottenAnyway(error)) {
        app.reportError(error, 'The chat could not be forgotten');
        return;
      }
      done = null;
      toast(error.message, 'error'); // forgotten; only the search index is left to scrub
    }
    const wasShown = thread.id === current;
    listed = listed.filter((each) => each.id !== thread.id);
    render();
    if (wasShown) await openNewest();
    if (done) toast(forgottenText(done));
  }

  async function restore(thread) {
    const ch = channel;
    try {
      await post(`${threadsPath(ch, thread.id)}/restore`);
    } catch (error) {
      app.reportError(error, 'The chat could not be restored');
      return;
    }
    if (ch !== channel) return;
    listed = listed.filter((each) => each.id !== thread.id);
    render();
    toast(`“${thread.title}” is back in your chats.`);
  }

  /** Show the chat most recently written in (a new one when there is none). */
  async function openNewest() {
    const ch = channel;
    let threads = [];
    try {
      threads = await get(`${threadsPath(ch)}${query({ view: 'active' })}`);
    } catch (error) {
      app.reportError(error, 'The chats could not be loaded');
    }
    if (ch !== channel) return;
    app.navigate('chat', ch, threads.length ? String(threads[0].id) : NEW);
  }

  /** A toast with an Undo button, for as long as undoing makes sense. */
  function undoToast(message, undo) {
    const button = h('button', { type: 'button', class: 'toast-undo' }, 'Undo');
    const item = h('div', { class: 'toast-item toast-info toast-with-action' }, message, button);
    const timer = setTimeout(() => item.remove(), UNDO_MS);
    button.addEventListener('click', async () => {
      clearTimeout(timer);
      item.remove();
      try {
        await undo();
      } catch (error) {
        app.reportError(error, 'That could not be undone');
      }
    });
    $('#toast').append(item);
  }

  // ------------------------------------------------------------ routing

  /**
   * Show the chat the address names (`part`: a thread id, "new", or nothing) of `next`.
   * Nothing keeps the chat shown, or opens the one most recently written in when the
   * channel is (re)entered (`reload`).
   */
  async function open(next, part, { reload = false } = {}) {
    const wanted = wantedThread(part);
    const entering = reload || next !== channel;
    if (entering) {
      channel = next;
      view = 'active';
      listed = [];
      known.clear();
      clear(list);
      showViews();
    }
    if (wanted === undefined && !entering) {
      nameInAddress(current); // the same chat, now named in the address
      return;
    }
    if (wanted === undefined) {
      // The chat most recently written in: the list says which, and the chat waits for it
      // (a message typed meanwhile goes to it).
      current = null;
      title.textContent = '';
      const newest = load().then((threads) => {
        if (next !== channel) return null;
        current = threads && threads.length ? threads[0].id : null;
        nameInAddress(current);
        render();
        showTitle();
        return current;
      });
      await chat.open(channel, newest);
      return;
    }
    const target = wanted === NEW ? null : wanted;
    if (entering) load(); // beside the messages, not before them
    if (!entering && target === current) {
      closeDrawer();
      if (focusComposer) chat.focus();
      focusComposer = false;
      return;
    }
    current = target;
    if (listed.length) render(); // else the list is on its way, and marks it
    showTitle();
    if (!entering && current !== null && !known.has(current)) findTitle(current);
    await chat.open(channel, current);
    if (focusComposer) chat.focus();
    focusComposer = false;
  }

  /**
   * Name chat `id` in the address, in place (no new history entry), while the address
   * still shows this channel's chat without naming one — or, `made`, names the new chat
   * just made. An address the person has moved on to is left alone.
   */
  function nameInAddress(id, { made = false } = {}) {
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean);
    const unnamed =
      (parts.length === 0 || parts[0] === 'chat') &&
      parts.length < 3 &&
      (parts.length < 2 || decodeURIComponent(parts[1]) === channel);
    if (made ? location.hash === address(null) : unnamed) {
      history.replaceState(history.state, '', address(id));
    }
  }

  /** The title of a chat not in the list shown (an archived one opened by its address). */
  async function findTitle(id) {
    const ch = channel;
    try {
      const archived = await get(`${threadsPath(ch)}${query({ view: 'archived' })}`);
      for (const thread of archived) known.set(thread.id, thread);
    } catch (error) {
      console.warn('The archived chats could not be read for a title:', error.message);
    }
    if (ch === channel && id === current) showTitle();
  }

  chat.hooks({
    created(ch, id) {
      if (ch !== channel) return;
      current = id;
      nameInAddress(id, { made: true });
      if (view === 'active') load();
    },
    changed(ch) {
      if (ch === channel && view === 'active') load();
    },
  });

  return {
    open,
    /** A chat's title, when the list has seen it. */
    titleOf: (id) => known.get(id)?.title ?? null,
  };
}
