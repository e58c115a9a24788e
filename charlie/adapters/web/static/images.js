// @ts-check
// Pictures attached to a message: the composer's tray of them (each with a × to take it off),
// and each made ready to send: read as a data URL, scaled down and re-encoded when it is too
// large for a model to take.

import { h, toast } from './dom.js';

const MAX_IMAGES = 4; // per message
const MAX_SIDE = 1600; // larger photos are scaled down before sending
const MAX_BYTES = 1_500_000;
const SENT_AS_IS = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']); // others: JPEG

function readAsDataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** A picture as a data URL to send: scaled down past MAX_SIDE, re-encoded as JPEG when too
 * large or of a type not every model takes. */
export async function imageDataUrl(file) {
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

/**
 * The pictures attached to the message being written, shown in `element`; `fileInput`
 * attaches more (MAX_IMAGES at most), and `removed()` is called when one is taken off.
 * @param {HTMLElement} element
 * @param {HTMLInputElement} fileInput
 * @param {() => void} removed
 */
export function attachmentTray(element, fileInput, removed) {
  /** @type {Array<{name: string, dataUrl: string}>} */
  let images = [];

  function render() {
    element.replaceChildren(
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
                render();
                removed();
              },
            },
            '×',
          ),
        ),
      ),
    );
    element.hidden = images.length === 0;
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
    render();
  });
  render();

  return {
    /** How many pictures are attached. */
    get count() {
      return images.length;
    },
    /** The pictures attached, as data URLs, in order. */
    get pictures() {
      return images.map((image) => image.dataUrl);
    },
    /** Take every picture off (the message went). */
    clear() {
      images = [];
      render();
    },
  };
}
