// @ts-check
// The HTTP API (docs/api.md): JSON requests with the CSRF header, errors as ApiError,
// and the chat's server-sent events read from a POST with fetch + ReadableStream.

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export class ApiError extends Error {
  constructor(status, kind, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.kind = kind;
  }

  get offline() {
    return this.status === 0;
  }
}

/** @type {(error: ApiError) => void} */
let onSignedOut = () => {};

/** Called whenever the server answers 401 to a signed-in request (the session ended). */
export function whenSignedOut(handler) {
  onSignedOut = handler;
}

export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)charlie_csrf=([^;]*)/);
  return match ? decodeURIComponent(match[1]) : '';
}

export function hasSessionHint() {
  return csrfToken() !== '';
}

function headersFor(method, hasBody, accept = 'application/json') {
  const headers = { Accept: accept };
  if (hasBody) headers['Content-Type'] = 'application/json';
  if (!SAFE_METHODS.has(method)) headers['X-CSRF-Token'] = csrfToken();
  return headers;
}

const OFFLINE_MESSAGE =
  "Can't reach Charlie's server. Check the connection; Charlie will reconnect when it can.";

async function send(method, path, body, accept) {
  try {
    return await fetch(path, {
      method,
      headers: headersFor(method, body !== undefined, accept),
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, 'Offline', OFFLINE_MESSAGE);
  }
}

async function errorFrom(response) {
  let kind = `HTTP${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}.`;
  try {
    const data = await response.json();
    if (data && typeof data.error === 'string') message = data.error;
    if (data && typeof data.kind === 'string') kind = data.kind;
  } catch {
    // Not JSON (a proxy's error page, say): the status line is all there is to say.
  }
  if (response.status === 429 && kind.startsWith('HTTP')) {
    message = 'Too many attempts. Wait a minute, then try again.';
  }
  return new ApiError(response.status, kind, message);
}

/**
 * `method path [body]` → the parsed JSON answer. Throws ApiError; status 0 means the
 * server could not be reached. `signedIn: false` (sign-in itself) keeps a 401 from
 * counting as "the session ended".
 */
export async function api(method, path, body, { signedIn = true } = {}) {
  const response = await send(method, path, body);
  if (!response.ok) {
    const error = await errorFrom(response);
    if (response.status === 401 && signedIn) onSignedOut(error);
    throw error;
  }
  if (response.status === 204) return null;
  const type = response.headers.get('content-type') || '';
  return type.includes('json') ? response.json() : response.text();
}

export const get = (path) => api('GET', path);
export const post = (path, body = {}) => api('POST', path, body);
export const put = (path, body) => api('PUT', path, body);
export const patch = (path, body) => api('PATCH', path, body);

export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== '') search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

export const enc = encodeURIComponent;

/** A note's id ("project/name", the name may hold folders) as a URL path. */
export function notePath(id) {
  return id.split('/').map(enc).join('/');
}

// ---------------------------------------------------------------- server-sent events

function parseEvent(block) {
  let event = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  const raw = data.join('\n');
  try {
    return { event, data: JSON.parse(raw) };
  } catch {
    return { event, data: { text: raw } };
  }
}

/** POST `body` (sent as `type`) and yield `{event, data}` as the answer streams in. */
async function* eventStream(path, body, type, signal) {
  let response;
  try {
    response = await fetch(path, {
      method: 'POST',
      headers: { ...headersFor('POST', false, 'text/event-stream'), 'Content-Type': type },
      body,
      credentials: 'same-origin',
      cache: 'no-store',
      signal,
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, 'Offline', OFFLINE_MESSAGE);
  }
  if (!response.ok) {
    const error = await errorFrom(response);
    if (response.status === 401) onSignedOut(error);
    throw error;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let finished = false;
  try {
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (error.name === 'AbortError') throw error;
        throw new ApiError(0, 'Offline', 'The connection dropped while Charlie was answering.');
      }
      if (chunk.done) {
        finished = true;
        break;
      }
      // Lines may end in \r\n, \n or \r; a \r at the very end may be half of a \r\n.
      buffer = (buffer + chunk.value).replace(/\r\n/g, '\n').replace(/\r(?!$)/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const parsed = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (parsed) yield parsed;
      }
    }
    const rest = parseEvent(buffer.replace(/\r$/, '').trim());
    if (rest) yield rest;
  } finally {
    // Stopped early (the page moved on): hang up instead of leaving the stream open.
    if (!finished) reader.cancel().catch(() => {});
  }
}

/**
 * POST a chat message to `thread` of `channel` (null: the thread most recently written in)
 * and yield `{event, data}` as the reply streams in (`trace`, `token`, `notice`, `reply`,
 * `suggestions`, `distilled`, `error`, `done`).
 */
export function chatStream(channel, payload, signal, thread = null) {
  const path = `/api/channels/${enc(channel)}/chat${query({ thread })}`;
  return eventStream(path, JSON.stringify(payload), 'application/json', signal);
}

/**
 * A message action that answers again, streaming as a chat message does: `regenerate`
 * (message `id` is a reply, or your unanswered last message: retry) or `edit` (body
 * `{text}`: your message `id`, changed and sent again).
 */
export function messageStream(channel, thread, id, action, body, signal) {
  const path = `/api/channels/${enc(channel)}/threads/${enc(thread)}/messages/${enc(id)}/${action}`;
  return eventStream(path, JSON.stringify(body), 'application/json', signal);
}

/**
 * POST a recording (16-bit mono PCM at `rate`, an ArrayBuffer or typed array) as a spoken
 * turn. Yields the chat's events plus `heard` first, then `spoken` and one `audio` per
 * sentence of the spoken reply.
 */
export function voiceStream(channel, pcm, signal, thread = null, rate = 16000) {
  const path = `/api/channels/${enc(channel)}/voice${query({ rate, thread })}`;
  return eventStream(path, pcm, 'audio/L16', signal);
}
