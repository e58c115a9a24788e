// @ts-check
// Pictures attached to a message, made ready to send: read as data URLs, scaled down and
// re-encoded when they are too large for a model to take.

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
