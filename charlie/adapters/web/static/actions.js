// @ts-check
// What a person can do with one message, as the conversation draws it: copy it; regenerate
// Charlie's last reply; page through a message's alternatives (the replies regenerated in
// its place, the versions of an edited message); edit their own message and send it again;
// retry a turn that failed. chat.js decides which of these apply and carries them out; this
// file only draws the controls and copies text.

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

