// The conversation: messages, the composer (text and images), the streamed reply with its
// tool trace, notices, errors and suggested notes. Typed and spoken turns (voice.js) share
// the same reply rendering. A message found by recall (recall.js) is shown among the
// messages around it until the person goes back to the latest.

import { ApiError, api, chatStream, enc, get, post, query, voiceStream } from './api.js';
import { $, clear, h, toast, when } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { fullDate } from './recall.js';
import { traceBlock } from './trace.js';

const HISTORY_LIMIT = 50;
const AROUND = 5; // messages shown either side of a message found
const MAX_IMAGES = 4;
const MAX_SIDE = 1600; // larger photos are scaled down before sending
const MAX_BYTES = 1_500_000;
const SENT_AS_IS = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']); // others: JPEG

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
  let generation = 0; // bumps on every channel switch, so late answers are dropped
  let controller = null;
  let images = [];
  let viewingEarlier = false; // the list shows messages around one found, not the latest
  let pendingJump = null; // {channel, id}: the message to show when that channel opens

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
    return h(
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
  }

  function assistantMessage(message) {
    const item = h('li', { class: 'msg msg-assistant', dataset: { id: message.id ?? '' } });
    item.append(head(message.speaker || 'Charlie', message.created_at));
    if (message.trace && message.trace.length) item.append(traceBlock(message.trace).element);
    item.append(h('div', { class: 'msg-body md' }, renderMarkdown(message.content)));
    return item;
  }

  function messageElement(message) {
    return message.role === 'user' ? userMessage(message) : assistantMessage(message);
  }

  async function open(nextChannel) {
    // A reply still streaming for the channel we leave goes on in the background (so the
    // server finishes and stores it); it is just no longer shown.
    controller = null;
    setBusy(false);
    channel = nextChannel;
    generation += 1;
    const mine = generation;
    heading.textContent = app.isPrivate(channel)
      ? 'Private channel'
      : `${app.channelName(channel)}`;
    clear(list);
    setViewingEarlier(false);
    empty.hidden = false;
    empty.textContent = 'Loading messages…';
    if (pendingJump && pendingJump.channel === channel) {
      const { id } = pendingJump;
      pendingJump = null;
      await showAround(id);
      return;
    }
    pendingJump = null;
    try {
      const messages = await get(`/api/channels/${enc(channel)}/messages?limit=${HISTORY_LIMIT}`);
      if (mine !== generation) return;
      list.prepend(...messages.map(messageElement)); // before anything sent while loading
      if (messages.length >= HISTORY_LIMIT) {
        list.prepend(
          h('li', { class: 'msg-more muted small' }, `Showing the last ${HISTORY_LIMIT} messages.`),
        );
      }
      updateEmpty();
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

  // The message `id` of this channel with the messages around it, scrolled to and marked.
  async function showAround(id) {
    generation += 1;
    const mine = generation;
    const around = query({ around: id, before: AROUND, after: AROUND });
    const path = `/api/channels/${enc(channel)}/messages${around}`;
    let messages;
    try {
      messages = await get(path);
    } catch (error) {
      if (mine !== generation) return;
      app.reportError(error, 'That message could not be shown');
      if (!list.children.length) open(channel);
      return;
    }
    if (mine !== generation) return;
    clear(list);
    list.append(...messages.map(messageElement));
    const found = [...list.children].find((item) => item.dataset.id === String(id));
    const shown = messages.find((message) => String(message.id) === String(id));
    setViewingEarlier(true, shown ? shown.created_at : null);
    updateEmpty();
    if (!found) return;
    found.classList.add('msg-found');
    found.tabIndex = -1;
    found.scrollIntoView({ block: 'center' });
    found.focus({ preventScroll: true });
    status.textContent = 'Showing the message found, with the messages around it.';
  }

  /** Show message `id` of channel `target` in place (once that channel opens, if another). */
  function showMessage(target, id) {
    if (target === channel) return showAround(id);
    pendingJump = { channel: target, id };
    return Promise.resolve();
  }

  async function backToLatest() {
    pendingJump = null;
    await open(channel);
  }

  $('#back-to-latest').addEventListener('click', async () => {
    await backToLatest();
    input.focus();
  });

  // ------------------------------------------------------------ one streamed reply

  function pendingReply() {
    const body = h('div', { class: 'msg-body md streaming' });
    const trace = traceBlock([], { open: true });
    trace.element.hidden = true;
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
    let voice = null; // the "spoken by" label of a spoken reply
    const render = () => {
      frame = 0;
      body.replaceChildren(renderMarkdown(text));
      scrollDown();
    };
    return {
      item,
      get text() {
        return text;
      },
      trace(step) {
        trace.element.hidden = false;
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
        if (typeof message.content === 'string' && message.content !== text) {
          text = message.content;
          render();
        }
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
      suggestions(items) {
        if (items.length) extras.append(suggestionBox(items));
        scrollDown();
      },
      finish() {
        if (frame) cancelAnimationFrame(frame);
        render();
        typing.hidden = true;
        body.classList.remove('streaming');
        item.removeAttribute('aria-busy');
        if (!text) body.hidden = true;
      },
    };
  }

  function suggestionBox(items) {
    const listEl = h('ul', { class: 'suggestion-list' });
    for (const suggestion of items) {
      const row = h('li', { class: 'suggestion', dataset: { id: suggestion.id } });
      const pinnedIn = channel;
      const unpin = async (button) => {
        button.disabled = true;
        try {
          await api('DELETE', `/api/channels/${enc(pinnedIn)}/pins/${suggestion.note}`);
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

  function setBusy(busy) {
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    form.classList.toggle('busy', busy);
  }

  function abort() {
    if (controller) controller.abort();
    controller = null;
  }

  // One turn, typed or spoken: the person's message, then the reply streaming in below it.
  // `open(signal)` starts the event stream; `intercept` sees each event first and returns
  // true for those it handled itself; `failed(error, streamed)` hears of a failed turn.
  async function converse(userItem, open, { intercept = () => false, failed } = {}) {
    const mine = generation;
    list.append(userItem);
    const reply = pendingReply();
    list.append(reply.item);
    updateEmpty();
    scrollDown(true);
    setBusy(true);
    status.textContent = 'Charlie is answering…';
    const own = new AbortController();
    controller = own;
    let streamed = false;
    try {
      for await (const { event, data } of open(own.signal)) {
        streamed = true;
        if (mine !== generation) continue; // another channel is shown now
        if (!intercept(reply, event, data)) handle(reply, event, data);
      }
      if (mine === generation)
        status.textContent = reply.text ? 'Charlie replied.' : 'Charlie finished.';
    } catch (error) {
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
    return { streamed, current: mine === generation };
  }

  async function send() {
    const text = input.value.trim();
    if ((!text && !images.length) || controller || !channel) return;
    if (!app.online()) {
      toast("You're offline: the message was not sent.", 'error');
      return;
    }
    if (viewingEarlier) await backToLatest(); // the answer belongs after the latest
    const pictures = images.map((image) => image.dataUrl);
    const payload = { text, images: pictures };
    const userItem = userMessage(
      { speaker: app.user.name, content: text, created_at: new Date().toISOString() },
      pictures,
    );
    input.value = '';
    images = [];
    renderAttachments();
    const open = (signal) => chatStream(channel, payload, signal);
    const { current } = await converse(userItem, open, {
      failed(error, streamed) {
        if (!streamed && !input.value) input.value = text; // nothing was sent: keep the words
      },
    });
    if (current) input.focus();
  }

  /**
   * A spoken turn: `pcm` is 16 kHz 16-bit mono. The person's message shows what the server
   * heard; `onAudio(chunk)` gets each sentence of the spoken reply as it arrives. Resolves to
   * false when nothing was sent (another reply is still streaming, or offline).
   */
  async function speak(pcm, { onAudio = () => {} } = {}) {
    if (controller || !channel) return false;
    if (!app.online()) {
      toast("You're offline: what you said was not sent.", 'error');
      return false;
    }
    if (viewingEarlier) await backToLatest();
    const userItem = userMessage(
      { speaker: app.user.name, content: '', created_at: new Date().toISOString() },
      [],
      true,
    );
    const said = userItem.querySelector('.msg-body');
    said.classList.add('muted');
    said.textContent = 'Hearing what you said…';
    const to = channel;
    await converse(userItem, (signal) => voiceStream(to, pcm, signal), {
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
    return true;
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

  function readAsDataUrl(blob) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(blob);
    });
  }

  async function imageDataUrl(file) {
    let bitmap = null;
    try {
      bitmap = await createImageBitmap(file);
    } catch {
      throw new Error(`${file.name} is not an image this browser can read.`);
    }
    const scale = Math.min(1, MAX_SIDE / Math.max(bitmap.width, bitmap.height));
    if (scale === 1 && file.size <= MAX_BYTES && SENT_AS_IS.has(file.type)) {
      bitmap.close();
      return readAsDataUrl(file);
    }
    const canvas = document.createElement('canvas');
    canvas.width = Math.round(bitmap.width * scale);
    canvas.height = Math.round(bitmap.height * scale);
    canvas.getContext('2d').drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    bitmap.close();
    return canvas.toDataURL('image/jpeg', 0.85);
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
    get channel() {
      return channel;
    },
  };
}
