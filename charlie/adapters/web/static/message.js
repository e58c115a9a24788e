// @ts-check
// One message as the conversation shows it: its head (who spoke, and when), a person's words
// with any pictures attached, Charlie's stored reply with its tool trace. The reply still
// streaming in is reply.js's; chat.js places the messages and remembers which is which.

import { h, when } from './dom.js';
import { showReply } from './markdown.js';
import { traceBlock } from './trace.js';

/**
 * The head of a message: who spoke, and when (if known yet).
 * @param {string} speaker
 * @param {string} [createdAt]
 */
export function messageHead(speaker, createdAt) {
  return h(
    'div',
    { class: 'msg-head' },
    h('span', { class: 'speaker' }, speaker),
    createdAt ? h('time', { datetime: createdAt }, when(createdAt)) : null,
  );
}

/**
 * A person's message (`speaker`, `content`, `created_at`, and `id` once stored), with the
 * pictures sent with it (data URLs); `spoken` marks one said aloud.
 */
export function userMessage(message, pictures = [], spoken = false) {
  const said = messageHead(message.speaker, message.created_at);
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

/** Charlie's reply as stored: its tool trace, if it used tools, and its words. */
export function assistantMessage(message) {
  const item = h('li', { class: 'msg msg-assistant', dataset: { id: message.id ?? '' } });
  item.append(messageHead(message.speaker || 'Charlie', message.created_at));
  if (message.trace && message.trace.length) item.append(traceBlock(message.trace).element);
  item.append(showReply(h('div', { class: 'msg-body md' }), message));
  return item;
}
