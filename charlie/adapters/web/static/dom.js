// @ts-check
// Small DOM helpers. Text always becomes Text nodes: no HTML string is ever parsed.

/**
 * Create an element. `attrs` keys: `class`, `text`, `dataset` (object), `on<event>`
 * (a listener), anything else is set as an attribute (`true` sets it empty, `false`/`null`
 * leaves it out). Children may be nodes, strings, or (nested) arrays of them.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(parent, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
  return parent;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

export function show(el, visible = true) {
  el.hidden = !visible;
}

/** "2024-05-01T10:20:00+00:00" → a short local time ("10:20", or "1 May, 10:20"). */
export function when(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (sameDay) return time;
  const day = date.toLocaleDateString([], { day: 'numeric', month: 'short' });
  return `${day}, ${time}`;
}

/** Announce a short message to screen readers and show it briefly. */
export function toast(message, kind = 'info') {
  const box = document.getElementById('toast');
  if (!box) return;
  const item = h('div', { class: `toast-item toast-${kind}`, text: message });
  box.append(item);
  setTimeout(() => item.remove(), kind === 'error' ? 8000 : 4000);
}

export function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

/** Put `text` on the clipboard: the clipboard API where the page may use it, else the older
 *  copy by selection (a page served over plain http on a home network has no clipboard API).
 *  Focus goes back to `button`. Resolves to whether it was copied; the caller says so. */
export async function copyText(text, button) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (error) {
      console.warn('The clipboard refused the text; copying by selection instead.', error);
    }
  }
  const area = h('textarea', { readonly: true, class: 'copy-buffer', 'aria-hidden': 'true' });
  area.value = text;
  document.body.append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand('copy');
  } catch {
    copied = false; // told to the person by the caller
  }
  area.remove();
  button.focus();
  return copied;
}

/**
 * Scroll `element` to the top of the nearest box that scrolls it — that box alone, below its
 * `scroll-padding-top` (what a sticky row at its top covers). (The browser's scrollIntoView
 * scrolls every box around it too, the page included: with a banner shown, the app's header
 * went off the top and left a grey band.)
 */
export function bringIntoView(element) {
  for (let box = element.parentElement; box && box !== document.body; box = box.parentElement) {
    const style = getComputedStyle(box);
    const overflow = style.overflowY;
    if ((overflow === 'auto' || overflow === 'scroll') && box.scrollHeight > box.clientHeight) {
      const covered = parseFloat(style.scrollPaddingTop) || 0; // `auto`: nothing
      box.scrollTop +=
        element.getBoundingClientRect().top - box.getBoundingClientRect().top - covered;
      return;
    }
  }
}
