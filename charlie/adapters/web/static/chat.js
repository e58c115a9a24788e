// @ts-check
// The conversation: one thread (chat) of a channel, its messages (each drawn by message.js),
// the composer (text, and pictures in images.js's tray), and each answer's turn: the reply
// streamed in (reply.js: its tool trace, notices, errors and suggested notes), then settled
// as the server stored it. Typed and spoken turns (voice.js) share the same reply rendering.
// A message found by recall (recall.js) is shown among the messages around it until the
// person goes back to the latest. Each message has its actions (actions.js): copy;
// regenerate the last reply; page through alternatives; edit your own message and send it
// again; retry a failed turn; forget it. Every answer — sent, regenerated, edited, retried —
// streams the same way and can be stopped. Which thread is shown is decided by the chats
// list (threads.js).

import { messageActions } from './actions.js';
import { ApiError, chatStream, enc, get, post, query, voiceStream } from './api.js';
import { $, clear, h, toast } from './dom.js';
import { attachmentTray } from './images.js';
import { assistantMessage, userMessage } from './message.js';
import { fullDate } from './recall.js';
import { handleEvent, pendingReply } from './reply.js';

/** @typedef {import('./reply.js').Reply} Reply */
/**
 * One answer's stream, ended: whether any of it came (`streamed`), whether its thread is
 * still shown (`current`), the reply, and the error that ended it (null if none).
 * @typedef {{ streamed: boolean, current: boolean, reply: Reply, error: any }} Turn
 */

const HISTORY_LIMIT = 50;
const AROUND = 5; // messages shown either side of a message found

export function createChat(app) {
  const view = $('#chat-view');
  const list = $('#messages');
  const scroller = $('#messages-scroll');
  const empty = $('#messages-empty');
  const heading = $('#chat-heading');
  const form = $('#composer');
  const input = $('#chat-input');
  const sendButton = $('#send-button');
  const stopButton = $('#stop-button');
  const status = $('#chat-status');
  const earlierBar = $('#earlier-bar');
  const earlierText = $('#earlier-text');
  const tray = attachmentTray($('#attachments'), $('#image-input'), () => input.focus());

  let channel = null;
  let thread = null; // the thread shown: its id, or null for a new chat not started yet
  let generation = 0; // bumps on every thread switch, so late answers are dropped
  let controller = null;
  let viewingEarlier = false; // the list shows messages around one found, not the latest
  let pendingJump = null; // {channel, thread, id}: the message to show when that thread opens
  let finding = null; // while a chat opens (its thread looked up, its messages read): its promise
  /** @typedef {{ created(channel: string, thread: number): void, changed(channel: string, thread: number | null): void }} ChatHooks */
  /** @type {ChatHooks} */
  let hooks = { created() {}, changed() {} }; // the chats list hears of new and changed threads
  let starting = false; // a message is about to go: its chat is being looked up or made
  const shown = new WeakMap(); // each message's <li> → the message as the API gave it
  const actions = messageActions(app, {
    list,
    scroller,
    status,
    shown,
    get channel() {
      return channel;
    },
    get thread() {
      return thread;
    },
    get generation() {
      return generation;
    },
    get streaming() {
      return Boolean(controller);
    },
    get starting() {
      return starting;
    },
    get viewingEarlier() {
      return viewingEarlier;
    },
    converse,
    settle,
    reopen: () => open(channel, thread),
    showLatest(messages) {
      setViewingEarlier(false);
      showLatest(messages);
    },
    changed: () => hooks.changed(channel, thread),
  });

  // ------------------------------------------------------------ panes (phone layout)

  function showPane(pane) {
    view.dataset.pane = pane;
    for (const button of view.querySelectorAll('.pane-tabs button')) {
      button.setAttribute('aria-pressed', String(button.dataset.pane === pane));
    }
  }
  for (const button of view.querySelectorAll('.pane-tabs button')) {
    button.addEventListener('click', () => showPane(button.dataset.pane));
  }

  // ------------------------------------------------------------ messages

  function nearBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  }

  // While an answer comes in, the view follows it down as it grows, but never so far that the
  // person's message (or, for an answer to none, the answer's own start) leaves the top: an
  // answer is read from its start. A person who scrolls takes over: scrolled up, the view
  // stays where they put it; scrolled to the very end, it follows the end from then on.
  /**
   * @typedef {object} Follow
   * @property {HTMLElement} anchor what stays in view: the person's message, or the answer
   * @property {HTMLElement} answer the answer's element
   * @property {boolean} following the view moves with the answer
   * @property {boolean} pinned it stops where the anchor would leave the top
   * @property {number} at the scrollTop this code last set (any other is the person's doing)
   */
  /** @type {Follow | null} */
  let follow = null;

  /** Scroll the messages to `top` at once (the stylesheet's smooth scrolling is for people). */
  function scrollMessagesTo(top) {
    scroller.scrollTo({ top, behavior: 'instant' });
    if (follow) follow.at = scroller.scrollTop;
  }

  function scrollToEnd() {
    follow = null;
    scrollMessagesTo(scroller.scrollHeight);
  }

  /** Where following puts the view now: the end, or as near it as keeps the anchor in view. */
  function followedTop(following) {
    const end = scroller.scrollHeight - scroller.clientHeight;
    if (!following.pinned) return end;
    const origin = scroller.getBoundingClientRect().top - scroller.scrollTop;
    const top = (element) => element.getBoundingClientRect().top - origin;
    const gap = parseFloat(getComputedStyle(scroller).paddingTop) || 0;
    // A message taller than half the view gives way to the start of the answer.
    const pin = Math.max(
      top(following.anchor) - gap,
      top(following.answer) - scroller.clientHeight / 2,
    );
    return Math.max(0, Math.min(end, pin));
  }

  /** Keep the answer coming in in view (when the person has not scrolled away from it). */
  function scrollDown() {
    if (!follow) {
      if (nearBottom()) scrollMessagesTo(scroller.scrollHeight);
    } else if (follow.following) {
      scrollMessagesTo(followedTop(follow));
    }
  }

  /** An answer starts: follow it, its anchor the person's message before it, if any. */
  function startFollowing(answer, user) {
    const before = answer.previousElementSibling;
    const asked = before && before.classList.contains('msg-user') ? before : null;
    const anchor = /** @type {HTMLElement} */ (user || asked || answer);
    follow = { anchor, answer, following: true, pinned: true, at: scroller.scrollTop };
    scrollDown();
  }

  scroller.addEventListener('scroll', () => {
    if (!follow || Math.abs(scroller.scrollTop - follow.at) <= 1) return; // our own scroll
    const atEnd = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight <= 2;
    if (atEnd && !follow.following) {
      follow.following = true; // they went to the end: follow it there
      follow.pinned = false;
    } else if (!atEnd) {
      follow.following = false; // they scrolled away: leave the view where they put it
    }
    follow.at = scroller.scrollTop;
  });

  function updateEmpty() {
    const hasMessages = list.children.length > 0;
    empty.hidden = hasMessages;
    if (!hasMessages) {
      empty.textContent = app.isPrivate(channel)
        ? 'Your private channel is empty. Only you can see it, and nothing said here is ' +
          'written to files. Say something to start.'
        : `No messages yet in ${app.channelName(channel)}. Say something to start — every ` +
          'few messages Charlie distills the conversation into the memory beside it.';
    }
  }

  /** A message from the API as the list shows it, remembered for its actions. */
  function messageElement(message) {
    const item =
      message.role === 'user'
        ? userMessage({ ...message, speaker: message.speaker || app.user.name })
        : assistantMessage(message);
    if (message.id) shown.set(item, message);
    return item;
  }

  /** `/api/channels/…/messages` of the thread shown, with `params`. */
  function messagesPath(params = {}) {
    return `/api/channels/${enc(channel)}/messages${query({ thread, ...params })}`;
  }

  /** The list shows `messages`, the latest of the thread (HISTORY_LIMIT at most). */
  function showLatest(messages, { keep = false } = {}) {
    if (!keep) clear(list);
    list.prepend(...messages.map(messageElement)); // before anything sent while loading
    if (messages.length >= HISTORY_LIMIT) {
      list.prepend(
        h('li', { class: 'msg-more muted small' }, `Showing the last ${HISTORY_LIMIT} messages.`),
      );
    }
    updateEmpty();
    actions.update();
  }

  /**
   * Show thread `nextThread` of `nextChannel` (null: a new chat, made when its first message
   * is sent; a promise of either while the chats list finds out which). A reply still
   * streaming for the thread we leave goes on in the background (so the server finishes
   * and stores it); it is just no longer shown.
   */
  async function open(nextChannel, nextThread = null) {
    // A message sent while the chat opens waits until its messages are shown: sent sooner,
    // it would be shown twice (as sent, and again among the messages read back).
    const opening = openNow(nextChannel, nextThread);
    finding = opening;
    try {
      await opening;
    } finally {
      if (finding === opening) finding = null;
    }
  }

  async function openNow(nextChannel, nextThread) {
    controller = null;
    follow = null;
    setBusy(false);
    channel = nextChannel;
    thread = null;
    generation += 1;
    const mine = generation;
    heading.textContent = app.isPrivate(channel)
      ? 'Private channel'
      : `${app.channelName(channel)}`;
    clear(list);
    setViewingEarlier(false);
    if (nextThread instanceof Promise) {
      empty.hidden = false;
      empty.textContent = 'Loading messages…';
      const found = await nextThread;
      if (mine !== generation) return;
      nextThread = found;
    }
    thread = nextThread;
    if (
      pendingJump &&
      pendingJump.channel === channel &&
      (pendingJump.thread === null || pendingJump.thread === thread)
    ) {
      const { id } = pendingJump;
      pendingJump = null;
      await showAround(id);
      return;
    }
    pendingJump = null;
    if (thread === null) {
      updateEmpty();
      return;
    }
    empty.hidden = false;
    empty.textContent = 'Loading messages…';
    try {
      const messages = await get(messagesPath({ limit: HISTORY_LIMIT }));
      if (mine !== generation) return;
      showLatest(messages, { keep: true });
      scrollToEnd();
    } catch (error) {
      if (mine !== generation) return;
      empty.hidden = false;
      empty.textContent = '';
      empty.append(app.errorText(error, 'The messages could not be loaded'));
    }
  }

  // ------------------------------------------------------------ a message found, in place

  function setViewingEarlier(earlier, createdAt = null) {
    viewingEarlier = earlier;
    earlierBar.hidden = !earlier;
    earlierText.textContent = createdAt
      ? `You are viewing earlier messages, from ${fullDate(createdAt)}.`
      : 'You are viewing earlier messages.';
  }

  // The message `id` of this thread with the messages around it, scrolled to and marked.
  async function showAround(id) {
    generation += 1;
    follow = null;
    const mine = generation;
    let messages;
    try {
      messages = await get(messagesPath({ around: id, before: AROUND, after: AROUND }));
    } catch (error) {
      if (mine !== generation) return;
      app.reportError(error, 'That message could not be shown');
      if (!list.children.length) open(channel, thread);
      return;
    }
    if (mine !== generation) return;
    clear(list);
    list.append(...messages.map(messageElement));
    const found = [...list.children].find((item) => item.dataset.id === String(id));
    const message = messages.find((each) => String(each.id) === String(id));
    setViewingEarlier(true, message ? message.created_at : null);
    updateEmpty();
    actions.update();
    if (!found) return;
    found.classList.add('msg-found');
    found.tabIndex = -1;
    found.scrollIntoView({ block: 'center' });
    found.focus({ preventScroll: true });
    status.textContent = 'Showing the message found, with the messages around it.';
  }

  /**
   * Show message `id` of thread `targetThread` of channel `target` in place (once that thread
   * opens, if another is shown). A null thread: whichever of the channel's holds it.
   */
  function showMessage(target, id, targetThread = null) {
    if (target === channel && (targetThread === null || targetThread === thread)) {
      return showAround(id);
    }
    pendingJump = { channel: target, thread: targetThread, id };
    return Promise.resolve();
  }

  async function backToLatest() {
    pendingJump = null;
    await open(channel, thread);
  }

  $('#back-to-latest').addEventListener('click', async () => {
    await backToLatest();
    input.focus();
  });

  // ------------------------------------------------------------ one answer's turn

  function setBusy(busy) {
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    form.classList.toggle('busy', busy);
    actions.update();
  }

  // Stop the answer streaming: its stream ends (converse then puts Send back).
  function abort() {
    if (controller) controller.abort();
  }

  // One answer streaming in: after the person's message `user` (a typed or spoken turn), in
  // place of `replacing` (a regenerated reply, a failed turn retried), or else at the end.
  // `open(signal)` starts the event stream; `intercept` sees each event first and returns
  // true for those it handled itself; `failed(error, streamed)` hears of a failed turn.
  // The answer is complete at its `answered` event (`reply`: the reply stored; a spoken turn
  // passes `spoken`, sent once its speech is too): the composer is free from then on, and
  // what the stream brings after it — suggested notes, notices, the memory distilled from the
  // conversation, which may take a minute on a small model — is read in the background.
  // Events this page does not know (a newer server's) are passed over.
  /**
   * @param {(signal: AbortSignal) => AsyncIterable<{event: string, data: any}>} open
   * @param {{
   *   user?: HTMLElement | null,
   *   replacing?: HTMLElement | null,
   *   intercept?: (reply: Reply, event: string, data: any) => boolean,
   *   failed?: (error: any, streamed: boolean) => void,
   *   answered?: string,
   * }} [options]
   * @returns {Promise<Turn>}
   */
  async function converse(
    open,
    { user = null, replacing = null, intercept = () => false, failed, answered = 'reply' } = {},
  ) {
    const mine = generation;
    if (user) list.append(user);
    const reply = pendingReply({
      app,
      channel,
      scrollDown,
      remember: (item, message) => shown.set(item, message),
      busy: () => Boolean(controller),
      retry: (asked, item) => actions.answerAgain(asked, item),
    });
    if (replacing && replacing.parentNode === list) replacing.replaceWith(reply.item);
    else list.append(reply.item);
    reply.item.dataset.stream = 'open'; // until the stream ends, after the answer too
    const own = new AbortController();
    controller = own;
    updateEmpty();
    startFollowing(reply.item, user);
    setBusy(true);
    status.textContent = 'Charlie is answering…';
    const events = open(own.signal)[Symbol.asyncIterator]();
    let streamed = false;
    let ended = false; // the stream ended with the answer (or before it was complete)
    let error = null;
    try {
      for (;;) {
        const next = await events.next();
        if (next.done) {
          ended = true;
          break;
        }
        streamed = true;
        const { event, data } = next.value;
        if (mine === generation && !intercept(reply, event, data)) {
          handleEvent(app, reply, event, data);
        } // else another thread is shown now
        if (event === answered) break;
      }
      if (mine === generation)
        status.textContent = reply.text ? 'Charlie replied.' : 'Charlie finished.';
    } catch (caught) {
      ended = true;
      error = caught;
      if (error.name === 'AbortError') {
        reply.notice(
          'Stopped. What arrived so far is shown; the server may still finish the reply.',
        );
      } else {
        reply.error(error.message, error.kind);
        if (error instanceof ApiError && error.offline) app.markOffline();
        if (
          error instanceof ApiError &&
          (error.status === 502 || error.status === 503) &&
          error.kind !== 'VoiceUnavailable'
        ) {
          app.llmProblem(error.message);
        }
        if (failed) failed(error, streamed);
      }
      if (mine === generation) status.textContent = 'The reply failed.';
    } finally {
      reply.finish();
      if (controller === own) {
        controller = null;
        setBusy(false);
      }
    }
    if (ended) delete reply.item.dataset.stream;
    else afterTheAnswer(events, reply, intercept, mine);
    return { streamed, current: mine === generation, reply, error };
  }

  /**
   * The rest of an answer's stream, once the answer is complete: shown with the reply while
   * its thread is. A failure now is no failed answer (the reply is stored): it is a notice.
   * @param {AsyncIterator<{event: string, data: any}>} events
   * @param {Reply} reply
   * @param {(reply: Reply, event: string, data: any) => boolean} intercept
   * @param {number} mine the generation the answer belongs to
   */
  async function afterTheAnswer(events, reply, intercept, mine) {
    try {
      for (;;) {
        const next = await events.next();
        if (next.done) return;
        const { event, data } = next.value;
        if (mine !== generation || intercept(reply, event, data)) continue;
        if (event === 'error') {
          reply.notice(`The reply is saved, but what came after it failed: ${data.error}`);
        } else {
          handleEvent(app, reply, event, data);
        }
      }
    } catch (error) {
      if (error instanceof ApiError && error.offline) app.markOffline();
      if (mine === generation) {
        reply.notice(`The reply is saved; the connection closed after it. ${error.message}`);
      }
    } finally {
      delete reply.item.dataset.stream;
    }
  }

  /**
   * After an answer, the conversation as the server now has it: the ids of the person's
   * message and of the reply (and every message's alternatives), so their actions work; an
   * answer that failed or was stopped offered again (Retry), or, for a regenerated reply,
   * the old one back (a failed regenerate changes nothing); the chats list told. `asked` is
   * {item, text, kept?}: the person's message as shown, when one was sent (`kept()`, called
   * when it turns out stored after a failed answer, takes its words out of the box: true if
   * they were there); `replaced` the reply a regenerate took the place of. The reply stays
   * aria-busy until then.
   */
  async function settle(result, { asked = null, replaced = null } = {}) {
    const mine = generation;
    try {
      if (result.current && thread !== null) await readBack(result, asked, replaced);
    } finally {
      result.reply.item.removeAttribute('aria-busy');
      actions.update();
      if (result.current) scrollDown(); // its actions, shown now, stay in view too
    }
    if (result.current && mine === generation) hooks.changed(channel, thread);
  }

  function itemOf(id) {
    return [...list.children].find((item) => item.dataset.id === String(id)) || null;
  }

  async function readBack({ reply, error }, asked, replaced) {
    const mine = generation;
    let latest = [];
    for (let attempt = 1; attempt <= 3 && !latest.length; attempt += 1) {
      try {
        latest = await get(messagesPath({ limit: 4 })); // a busy server may drop one read
      } catch (failure) {
        console.warn(`The messages just sent could not be read back (try ${attempt}):`, failure.message);
        await new Promise((resolve) => setTimeout(resolve, 300 * attempt));
      }
    }
    if (mine !== generation) return;
    if (asked) {
      const stored = [...latest]
        .reverse()
        .find((m) => m.role === 'user' && m.content === asked.text && !itemOf(m.id));
      if (stored) {
        asked.item.dataset.id = stored.id;
        if (reply.failure && asked.kept && asked.kept()) {
          reply.notice(
            'Your message reached Charlie before the connection broke and is saved, so it is ' +
              'not in the box to be sent twice.',
          );
        }
      }
    }
    for (const message of latest) {
      const item = itemOf(message.id);
      if (item) shown.set(item, message);
    }
    const last = latest[latest.length - 1];
    const stopped = Boolean(error) && error.name === 'AbortError';
    if (!last || reply.item.dataset.id || !(reply.failure || stopped)) return;
    if (replaced && String(last.id) === replaced.dataset.id) {
      reply.item.replaceWith(replaced); // the server kept the reply as it was
      shown.set(replaced, last);
      if (stopped) toast('Stopped: the reply is as it was.');
      else toast(`The reply could not be regenerated: ${reply.failure}`, 'error');
    } else if (last.role === 'assistant' && !itemOf(last.id)) {
      if (last.content && last.content !== reply.text) {
        reply.stored(last); // the server went on after the connection broke: what it kept
        reply.notice('The connection broke during the answer; this is the reply as it was saved.');
      } else {
        reply.item.dataset.id = last.id; // cut off mid-answer: the part shown was kept
        shown.set(reply.item, last);
      }
      reply.offerRetry(last.id);
    } else if (last.role === 'user' && last.speaker === app.user.name && itemOf(last.id)) {
      reply.offerRetry(last.id); // your message, with no answer
    }
  }

  /** The thread shown, made now if it is a new chat not started yet (null if that failed). */
  async function ensureThread() {
    if (thread !== null) return thread;
    const mine = generation;
    const made = await post(`/api/channels/${enc(channel)}/threads`, {});
    if (mine !== generation) return null; // another chat was opened meanwhile
    thread = made.id;
    hooks.created(channel, made.id);
    return thread;
  }

  /**
   * Ready the chat shown for a message: wait while it is looked up, go back to its latest
   * messages, make it if it is a new chat. False when it could not be made (the person is
   * told why), or another chat was opened meanwhile.
   */
  async function readyToSend() {
    starting = true;
    try {
      if (finding) await finding;
      if (viewingEarlier) await backToLatest(); // the answer belongs after the latest
      const mine = generation;
      await ensureThread();
      return mine === generation && thread !== null;
    } catch (error) {
      app.reportError(error, 'The new chat could not be started');
      return false;
    } finally {
      starting = false;
    }
  }

  async function send() {
    const text = input.value.trim();
    if ((!text && !tray.count) || controller || starting || !channel) return;
    if (!app.online()) {
      toast("You're offline: the message was not sent.", 'error');
      return;
    }
    if (!(await readyToSend())) return; // the words stay in the box
    const pictures = tray.pictures;
    const payload = { text, images: pictures };
    const userItem = userMessage(
      { speaker: app.user.name, content: text, created_at: new Date().toISOString() },
      pictures,
    );
    input.value = '';
    tray.clear();
    const to = { channel, thread };
    const open = (signal) => chatStream(to.channel, payload, signal, to.thread);
    const result = await converse(open, {
      user: userItem,
      failed(error, streamed) {
        if (!streamed && !input.value) input.value = text; // nothing was sent: keep the words
      },
    });
    // A message the server stored though the stream broke before it said so (`failed` put
    // the words back) leaves the box: sent again, it would be stored twice.
    const kept = () => {
      if (input.value !== text) return false;
      input.value = '';
      return true;
    };
    await settle(result, { asked: { item: userItem, text, kept } });
    if (result.current) input.focus();
  }

  /**
   * A spoken turn: `pcm` is 16 kHz 16-bit mono. The person's message shows what the server
   * heard; `onAudio(chunk)` gets each sentence of the spoken reply as it arrives. Resolves to
   * false when nothing was sent (another reply is still streaming, or offline).
   * @param {ArrayBuffer} pcm
   * @param {{ onAudio?: (chunk: any) => void }} [options]
   */
  async function speak(pcm, { onAudio = () => {} } = {}) {
    if (controller || starting || !channel) return false;
    if (!app.online()) {
      toast("You're offline: what you said was not sent.", 'error');
      return false;
    }
    if (!(await readyToSend())) return false;
    const userItem = userMessage(
      { speaker: app.user.name, content: '', created_at: new Date().toISOString() },
      [],
      true,
    );
    const said = userItem.querySelector('.msg-body');
    said.classList.add('muted');
    said.textContent = 'Hearing what you said…';
    const to = { channel, thread };
    const open = (signal) => voiceStream(to.channel, pcm, signal, to.thread);
    const result = await converse(open, {
      user: userItem,
      answered: 'spoken', // the reply is stored before its speech is all sent
      intercept(reply, event, data) {
        if (event === 'heard') {
          said.classList.remove('muted');
          said.textContent = data.text || '';
        } else if (event === 'spoken') {
          reply.spoken(data.text || '');
        } else if (event === 'audio') {
          reply.spoken('', data);
          onAudio(data);
        } else {
          return false;
        }
        scrollDown();
        return true;
      },
      failed(error, streamed) {
        if (!streamed) {
          said.textContent =
            error.kind === 'AudioError' ? 'A recording with no words made out' : 'A recording';
        }
      },
    });
    await settle(result, { asked: { item: userItem, text: said.textContent } });
    return true;
  }

  // ------------------------------------------------------------ composer

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.altKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  stopButton.addEventListener('click', abort);

  return {
    open,
    abort,
    speak,
    showMessage,
    showPane,
    focus: () => input.focus(),
    /** `created(channel, id)`: a new chat was made; `changed(channel, id)`: one was written. */
    hooks(next) {
      hooks = { ...hooks, ...next };
    },
    get channel() {
      return channel;
    },
    get thread() {
      return thread;
    },
  };
}
