// @ts-check
// The conversation: one thread (chat) of a channel, its messages, the composer (text and
// images), the streamed reply with its tool trace, notices, errors and suggested notes.
// Typed and spoken turns (voice.js) share the same reply rendering. A message found by
// recall (recall.js) is shown among the messages around it until the person goes back to
// the latest. Each message has its actions (actions.js): copy; regenerate the last reply;
// page through alternatives; edit your own message and send it again; retry a failed turn.
// Every answer — sent, regenerated, edited, retried — streams the same way and can be
// stopped. Which thread is shown is decided by the chats list (threads.js).

import { editForm, forgottenText, messageToolbar, retryButton } from './actions.js';
import {
  ApiError,
  api,
  chatStream,
  enc,
  get,
  messageStream,
  post,
  query,
  voiceStream,
} from './api.js';
import { $, clear, h, toast, when } from './dom.js';
import { imageDataUrl } from './images.js';
import { showReply } from './markdown.js';
import { fullDate } from './recall.js';
import { suggestionBox } from './suggestions.js';
import { traceBlock } from './trace.js';

const HISTORY_LIMIT = 50;
const AROUND = 5; // messages shown either side of a message found
const MAX_IMAGES = 4;

/** The tooltip of a reply's "Spoken by" line: what was said, and any engine skipped. */
function voiceTitle(voice) {
  const lines = [voice.text ? `Spoken: “${voice.text}”` : ''];
  if (voice.skipped.length) lines.push(`Skipped: ${voice.skipped.join('; ')}`);
  return lines.filter(Boolean).join('\n');
}

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
  const fileInput = $('#image-input');
  const attachments = $('#attachments');
  const status = $('#chat-status');
  const earlierBar = $('#earlier-bar');
  const earlierText = $('#earlier-text');

  let channel = null;
  let thread = null; // the thread shown: its id, or null for a new chat not started yet
  let generation = 0; // bumps on every thread switch, so late answers are dropped
  let controller = null;
  let images = [];
  let viewingEarlier = false; // the list shows messages around one found, not the latest
  let pendingJump = null; // {channel, thread, id}: the message to show when that thread opens
  let finding = null; // while a chat opens (its thread looked up, its messages read): its promise
  /** @typedef {{ created(channel: string, thread: number): void, changed(channel: string, thread: number | null): void }} ChatHooks */
  /** @type {ChatHooks} */
  let hooks = { created() {}, changed() {} }; // the chats list hears of new and changed threads
  const shown = new WeakMap(); // each message's <li> → the message as the API gave it

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

  function scrollDown(force = false) {
    if (force || nearBottom()) scroller.scrollTop = scroller.scrollHeight;
  }

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

  function head(speaker, createdAt) {
    return h(
      'div',
      { class: 'msg-head' },
      h('span', { class: 'speaker' }, speaker),
      createdAt ? h('time', { datetime: createdAt }, when(createdAt)) : null,
    );
  }

  function userMessage(message, pictures = [], spoken = false) {
    const said = head(message.speaker || app.user.name, message.created_at);
    if (spoken) said.append(h('span', { class: 'spoken-mark' }, 'spoken'));
    const item = h(
      'li',
      { class: `msg msg-user${spoken ? ' msg-spoken' : ''}`, dataset: { id: message.id ?? '' } },
      said,
      pictures.length
        ? h(
            'div',
            { class: 'msg-images' },
            pictures.map((src) => h('img', { src, alt: 'Attached image' })),
          )
        : null,
      h('div', { class: 'msg-body plain' }, message.content),
    );
    if (message.id) shown.set(item, message);
    return item;
  }

  function assistantMessage(message) {
    const item = h('li', { class: 'msg msg-assistant', dataset: { id: message.id ?? '' } });
    item.append(head(message.speaker || 'Charlie', message.created_at));
    if (message.trace && message.trace.length) item.append(traceBlock(message.trace).element);
    item.append(showReply(h('div', { class: 'msg-body md' }), message));
    if (message.id) shown.set(item, message);
    return item;
  }

  function messageElement(message) {
    return message.role === 'user' ? userMessage(message) : assistantMessage(message);
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
    updateActions();
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
      scrollDown(true);
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
    updateActions();
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

  // ------------------------------------------------------------ one streamed reply

  function pendingReply() {
    const body = h('div', { class: 'msg-body md streaming' });
    const trace = traceBlock([], { open: true }); // hidden until a tool is used
    const extras = h('div', { class: 'msg-extras' });
    const typing = h('p', { class: 'typing muted small' }, 'Charlie is thinking…');
    const item = h(
      'li',
      { class: 'msg msg-assistant', 'aria-busy': 'true' },
      head('Charlie'),
      trace.element,
      typing,
      body,
      extras,
    );
    let text = '';
    let frame = 0;
    let failure = null; // why the turn failed, when it did (an error is shown)
    let rendered = false; // the server's HTML of the stored reply is shown
    let voice = null; // the "spoken by" label of a spoken reply
    // While streaming, the words as plain text; the stored reply brings its HTML.
    const render = () => {
      frame = 0;
      body.replaceChildren(h('p', { class: 'streamed' }, text));
      scrollDown();
    };
    return {
      item,
      get text() {
        return text;
      },
      get failure() {
        return failure;
      },
      trace(step) {
        trace.add(step);
        typing.textContent =
          step.type === 'tool_call' ? `Charlie used ${step.name}…` : typing.textContent;
        scrollDown();
      },
      token(piece) {
        typing.hidden = true;
        text += piece;
        if (!frame) frame = requestAnimationFrame(render);
      },
      stored(message) {
        item.dataset.id = message.id ?? '';
        if (message.id) shown.set(item, message);
        if (typeof message.content === 'string') text = message.content;
        if (frame) cancelAnimationFrame(frame);
        frame = 0;
        showReply(body, { ...message, content: text });
        body.classList.remove('streaming');
        rendered = true;
        scrollDown();
        const time = item.querySelector('.msg-head');
        time.replaceWith(head(message.speaker || 'Charlie', message.created_at));
      },
      notice(message) {
        extras.append(h('p', { class: 'notice' }, message));
        scrollDown();
      },
      // Each sentence's speech (`chunk`) as it arrives, and the whole spoken text (`spokenText`)
      // once the reply is complete: a "Spoken by <engine>" line, with the spoken text and any
      // engine skipped in its title.
      spoken(spokenText, chunk = null) {
        if (!voice) voice = { element: null, text: '', engines: [], skipped: [] };
        if (spokenText) voice.text = spokenText;
        if (!chunk) {
          if (voice.element && spokenText) voice.element.title = voiceTitle(voice);
          return;
        }
        if (!voice.element) {
          voice.element = h('p', { class: 'voice-engine small muted' });
          extras.prepend(voice.element);
        }
        if (!voice.engines.includes(chunk.engine)) voice.engines.push(chunk.engine);
        for (const reason of chunk.skipped || []) {
          if (!voice.skipped.includes(reason)) voice.skipped.push(reason);
        }
        const resting = [...new Set(voice.skipped.map((reason) => reason.split(':')[0]))];
        voice.element.textContent =
          `Spoken by ${voice.engines.join(', ')}` +
          (resting.length ? ` (${resting.join(', ')} skipped)` : '');
        voice.element.title = voiceTitle(voice);
        voice.element.dataset.engine = voice.engines.join(',');
        voice.element.classList.toggle('voice-fallback', voice.skipped.length > 0);
      },
      error(message, kind) {
        typing.hidden = true;
        failure = message;
        extras.append(
          h(
            'div',
            { class: 'callout callout-error', role: 'alert' },
            h('strong', {}, "Charlie couldn't answer. "),
            message,
            kind && kind !== 'Offline' ? h('span', { class: 'muted small' }, ` (${kind})`) : null,
          ),
        );
        scrollDown();
      },
      // A Retry button in the (last) error or notice shown: answer message `asked` again.
      offerRetry(asked) {
        const said = [...extras.querySelectorAll('.callout-error, .notice')].pop();
        if (!said) return;
        said.append(' ', retryButton(() => answerAgain(asked, item), Boolean(controller)));
      },
      suggestions(items) {
        if (items.length) extras.append(suggestionBox(app, channel, items));
        scrollDown();
      },
      finish() {
        if (frame) cancelAnimationFrame(frame);
        if (!rendered) render();
        typing.hidden = true;
        body.classList.remove('streaming');
        if (!text) body.hidden = true; // aria-busy goes once the reply is settled
      },
    };
  }

  function setBusy(busy) {
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    form.classList.toggle('busy', busy);
    updateActions();
  }

  // Stop the answer streaming: its stream ends (converse then puts Send back).
  function abort() {
    if (controller) controller.abort();
  }

  // One answer streaming in: after the person's message `user` (a typed or spoken turn), in
  // place of `replacing` (a regenerated reply, a failed turn retried), or else at the end.
  // `open(signal)` starts the event stream; `intercept` sees each event first and returns
  // true for those it handled itself; `failed(error, streamed)` hears of a failed turn.
  /**
   * @param {(signal: AbortSignal) => AsyncIterable<{event: string, data: any}>} open
   * @param {{
   *   user?: HTMLElement | null,
   *   replacing?: HTMLElement | null,
   *   intercept?: (reply: any, event: string, data: any) => boolean,
   *   failed?: (error: any, streamed: boolean) => void,
   * }} [options]
   */
  async function converse(
    open,
    { user = null, replacing = null, intercept = () => false, failed } = {},
  ) {
    const mine = generation;
    if (user) list.append(user);
    const reply = pendingReply();
    if (replacing && replacing.parentNode === list) replacing.replaceWith(reply.item);
    else list.append(reply.item);
    const own = new AbortController();
    controller = own;
    updateEmpty();
    scrollDown(true);
    setBusy(true);
    status.textContent = 'Charlie is answering…';
    let streamed = false;
    let error = null;
    try {
      for await (const { event, data } of open(own.signal)) {
        streamed = true;
        if (mine !== generation) continue; // another thread is shown now
        if (!intercept(reply, event, data)) handle(reply, event, data);
      }
      if (mine === generation)
        status.textContent = reply.text ? 'Charlie replied.' : 'Charlie finished.';
    } catch (caught) {
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
    return { streamed, current: mine === generation, reply, error };
  }

  /** Whether an answer was refused before it started: the server changed nothing. */
  function refused({ streamed, error }) {
    return Boolean(error) && error.name !== 'AbortError' && !streamed;
  }

  /**
   * After an answer, the conversation as the server now has it: the ids of the person's
   * message and of the reply (and every message's alternatives), so their actions work; an
   * answer that failed or was stopped offered again (Retry), or, for a regenerated reply,
   * the old one back (a failed regenerate changes nothing); the chats list told. `asked` is
   * {item, text}: the person's message as shown, when one was sent; `replaced` the reply a
   * regenerate took the place of. The reply stays aria-busy until then.
   */
  async function settle(result, { asked = null, replaced = null } = {}) {
    const mine = generation;
    try {
      if (result.current && thread !== null) await readBack(result, asked, replaced);
    } finally {
      result.reply.item.removeAttribute('aria-busy');
      updateActions();
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
      if (stored) asked.item.dataset.id = stored.id;
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
      reply.item.dataset.id = last.id; // cut off mid-answer: the part shown was kept
      shown.set(reply.item, last);
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

  let starting = false; // a message is about to go: its chat is being looked up or made

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
    if ((!text && !images.length) || controller || starting || !channel) return;
    if (!app.online()) {
      toast("You're offline: the message was not sent.", 'error');
      return;
    }
    if (!(await readyToSend())) return; // the words stay in the box
    const pictures = images.map((image) => image.dataUrl);
    const payload = { text, images: pictures };
    const userItem = userMessage(
      { speaker: app.user.name, content: text, created_at: new Date().toISOString() },
      pictures,
    );
    input.value = '';
    images = [];
    renderAttachments();
    const to = { channel, thread };
    const open = (signal) => chatStream(to.channel, payload, signal, to.thread);
    const result = await converse(open, {
      user: userItem,
      failed(error, streamed) {
        if (!streamed && !input.value) input.value = text; // nothing was sent: keep the words
      },
    });
    await settle(result, { asked: { item: userItem, text } });
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

  // ------------------------------------------------------------ message actions

  /** Each message's actions as they apply now: after the list changes, or a reply streams. */
  function updateActions() {
    const items = [...list.children].filter(
      (item) => item.classList.contains('msg') && !item.hasAttribute('aria-busy'),
    );
    const last = items[items.length - 1];
    const busy = Boolean(controller);
    for (const item of items) {
      item.querySelector(':scope > .msg-actions')?.remove();
      const message = shown.get(item);
      if (!message || !message.id || item.classList.contains('msg-editing')) continue;
      const mine = message.role === 'user' && message.speaker === app.user.name;
      const newest = item === last && !viewingEarlier;
      const can = {
        busy,
        edit: mine,
        regenerate: message.role === 'assistant' && newest,
        retry: mine && newest, // your message with no answer: its turn failed
        forget: mine || app.isPrivate(channel), // the server says no to anyone else's
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
    if (controller || starting || !channel || thread === null) return;
    if (!app.online()) {
      toast("You're offline: nothing was sent.", 'error');
      return;
    }
    const to = { channel, thread };
    const open = (signal) =>
      messageStream(to.channel, to.thread, target, 'regenerate', {}, signal);
    const replaced = replacing && shown.has(replacing) ? replacing : null;
    const result = await converse(open, { replacing });
    await settle(result, { replaced });
  }

  /** Your message as an editor in its place, to change and send again. */
  function startEdit(item) {
    const message = shown.get(item);
    if (!message || controller || item.classList.contains('msg-editing')) return;
    const body = item.querySelector('.msg-body');
    const editor = editForm(message.content, {
      save: (text) => resend(item, message, text),
      cancel() {
        editor.element.remove();
        item.classList.remove('msg-editing');
        body.hidden = false;
        updateActions();
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
    if (controller || starting || thread === null) return;
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
    const to = { channel, thread };
    const open = (signal) =>
      messageStream(to.channel, to.thread, message.id, 'edit', { text }, signal);
    const result = await converse(open);
    if (result.current && refused(result)) {
      result.reply.item.remove(); // nothing changed on the server: as it was
      body.textContent = message.content;
      item.dataset.id = message.id;
      shown.set(item, message);
      item.after(...later);
      toast(`The message could not be sent again: ${result.error.message}`, 'error');
      updateActions();
      return;
    }
    await settle(result, { asked: { item, text } });
  }

  /** Forget a message for good (a person's message with Charlie's answer to it). */
  async function forgetMessage(message) {
    if (controller || thread === null) return;
    const answer = message.role === 'user' ? " and Charlie's answer to it" : '';
    const sure = window.confirm(
      `Forget this message${answer} for good? It leaves the conversation, the memory's ` +
        'quotes, recall and later exports. This cannot be undone.',
    );
    if (!sure) return;
    let done;
    try {
      done = await post(
        `/api/channels/${enc(channel)}/threads/${thread}/messages/${enc(message.id)}/forget`,
        {},
      );
    } catch (error) {
      app.reportError(error, 'The message could not be forgotten');
      return;
    }
    toast(forgottenText(done));
    await open(channel, thread);
    hooks.changed(channel, thread);
  }

  /** Show alternative `id` (a page through a message's versions) and the turns after it. */
  async function choose(id, item) {
    if (controller || thread === null) return;
    const mine = generation;
    const offset = item.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
    let messages;
    try {
      messages = await post(
        `/api/channels/${enc(channel)}/threads/${thread}/messages/${enc(id)}/choose`,
        {},
      );
    } catch (error) {
      app.reportError(error, 'That version could not be shown');
      return;
    }
    if (mine !== generation) return;
    setViewingEarlier(false);
    showLatest(messages);
    const now = [...list.children].find((each) => each.dataset.id === String(id));
    if (now) {
      const moved = now.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
      scroller.scrollTop += moved - offset; // the message stays where it was on screen
      now.querySelector('.msg-pager button:not(:disabled)')?.focus({ preventScroll: true });
      const count = now.querySelector('.msg-pager')?.getAttribute('aria-label');
      status.textContent = count ? `Showing ${count.toLowerCase()}.` : 'Showing that version.';
    }
    hooks.changed(channel, thread);
  }

  function handle(reply, event, data) {
    switch (event) {
      case 'trace':
        reply.trace(data);
        break;
      case 'token':
        reply.token(data.text || '');
        break;
      case 'notice':
        reply.notice(data.text || '');
        break;
      case 'reply':
        app.llmRecovered(); // the model answered: a banner about it is out of date
        if (data.message) reply.stored(data.message);
        break;
      case 'suggestions':
        reply.suggestions(data.suggestions || []);
        break;
      case 'distilled':
        app.memoryUpdated(data);
        break;
      case 'error':
        reply.error(data.error || 'Something went wrong.', data.kind);
        if (String(data.kind || '').startsWith('LLM')) app.llmProblem(data.error);
        break;
      default:
        break; // `done`, and anything newer than this page
    }
  }

  // ------------------------------------------------------------ images

  function renderAttachments() {
    attachments.replaceChildren(
      ...images.map((image, index) =>
        h(
          'figure',
          { class: 'attachment' },
          h('img', { src: image.dataUrl, alt: image.name }),
          h(
            'button',
            {
              type: 'button',
              class: 'attachment-remove',
              'aria-label': `Remove ${image.name}`,
              onclick: () => {
                images.splice(index, 1);
                renderAttachments();
                input.focus();
              },
            },
            '×',
          ),
        ),
      ),
    );
    attachments.hidden = images.length === 0;
  }

  fileInput.addEventListener('change', async () => {
    const files = [...fileInput.files];
    fileInput.value = '';
    for (const file of files) {
      if (images.length >= MAX_IMAGES) {
        toast(`At most ${MAX_IMAGES} images per message.`, 'error');
        break;
      }
      try {
        images.push({ name: file.name || 'image', dataUrl: await imageDataUrl(file) });
      } catch (error) {
        toast(error.message, 'error');
      }
    }
    renderAttachments();
  });

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
  renderAttachments();

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
