// @ts-check
// Charlie's reply as it streams in: the reply element (its tool trace, the words as they
// arrive, then the stored reply's HTML), its notices and errors, its suggested notes and, for
// a spoken turn, which voice spoke it; and what each event of the answer's stream does to it.
// chat.js starts the stream, places the reply and settles it once the stream ends.

import { retryButton } from './actions.js';
import { h } from './dom.js';
import { showReply } from './markdown.js';
import { messageHead } from './message.js';
import { suggestionBox } from './suggestions.js';
import { traceBlock } from './trace.js';

/** The tooltip of a reply's "Spoken by" line: what was said, and any engine skipped. */
function voiceTitle(voice) {
  const lines = [voice.text ? `Spoken: “${voice.text}”` : ''];
  if (voice.skipped.length) lines.push(`Skipped: ${voice.skipped.join('; ')}`);
  return lines.filter(Boolean).join('\n');
}

/**
 * What a reply needs of the chat it streams into.
 * @typedef {object} ReplyPlace
 * @property {object} app the app (openNote, reportError: for its suggested notes)
 * @property {string} channel the channel the reply is in: a note suggested is pinned there
 * @property {() => void} scrollDown keep the reply in view as it grows (chat.js decides how:
 *   never past the person's message, never when they scrolled away)
 * @property {(item: HTMLElement, message: any) => void} remember the stored message the
 *   reply's element now shows, for its actions
 * @property {() => boolean} busy whether an answer is streaming now (a Retry waits)
 * @property {(asked: number | string, item: HTMLElement) => void} retry answer message
 *   `asked` again, in place of the reply's element `item`
 */

/**
 * The reply being streamed in, not yet placed in the list (its `item`). It stays
 * aria-busy until chat.js has settled it.
 * @param {ReplyPlace} place
 */
export function pendingReply({ app, channel, scrollDown, remember, busy, retry }) {
  const body = h('div', { class: 'msg-body md streaming' });
  const trace = traceBlock([], { open: true }); // hidden until a tool is used
  const extras = h('div', { class: 'msg-extras' });
  const typing = h('p', { class: 'typing muted small' }, 'Charlie is thinking…');
  const item = h(
    'li',
    { class: 'msg msg-assistant', 'aria-busy': 'true' },
    messageHead('Charlie'),
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
      if (message.id) remember(item, message);
      if (typeof message.content === 'string') text = message.content;
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
      showReply(body, { ...message, content: text });
      body.classList.remove('streaming');
      rendered = true;
      scrollDown();
      const time = item.querySelector('.msg-head');
      time.replaceWith(messageHead(message.speaker || 'Charlie', message.created_at));
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
      said.append(' ', retryButton(() => retry(asked, item), busy()));
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

/** @typedef {ReturnType<typeof pendingReply>} Reply */

/**
 * What event `event` (with `data`) of an answer's stream does to reply `reply`, and to the
 * app (the model's health, the memory beside the chat).
 * @param {object} app
 * @param {Reply} reply
 * @param {string} event
 * @param {any} data
 */
export function handleEvent(app, reply, event, data) {
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
