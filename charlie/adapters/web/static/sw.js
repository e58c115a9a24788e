// Charlie's service worker: keeps the app shell (this page, its styles, scripts and icons)
// so the app opens without a network and says that it is offline. API requests are never
// cached and never answered from here: conversations, memory and notes live on the server.

const VERSION = 'charlie-shell-v9';
const SHELL = [
  '/',
  '/style.css',
  '/app.js',
  '/api.js',
  '/dom.js',
  '/markdown.js',
  '/trace.js',
  '/chat.js',
  '/message.js',
  '/reply.js',
  '/suggestions.js',
  '/images.js',
  '/recall.js',
  '/threads.js',
  '/actions.js',
  '/icons.js',
  '/memory.js',
  '/notes.js',
  '/settings.js',
  '/household.js',
  '/voice.js',
  '/voice-worklet.js',
  '/model.js',
  '/manifest.webmanifest',
  '/icons/icon-192.png',
  '/icons/icon-512.png',
  '/icons/icon-maskable-512.png',
  '/icons/apple-touch-icon.png',
];
const SHELL_PATHS = new Set(SHELL);

self.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(VERSION)
      .then((cache) => cache.addAll(SHELL.map((path) => new Request(path, { cache: 'reload' }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) =>
        Promise.all(
          keys
            .filter((key) => key.startsWith('charlie-shell-') && key !== VERSION)
            .map((key) => caches.delete(key)),
        ),
      )
      .then(() => self.clients.claim()),
  );
});

// Network first, so a new version shows as soon as it is served; the saved copy when the
// server can't be reached.
async function networkFirst(request, key) {
  const cache = await caches.open(VERSION);
  try {
    const response = await fetch(request);
    if (response.ok && response.type === 'basic') await cache.put(key, response.clone());
    return response;
  } catch (error) {
    const saved = await cache.match(key);
    if (saved) return saved;
    throw error;
  }
}

self.addEventListener('fetch', (event) => {
  const { request } = event;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (url.pathname === '/api' || url.pathname.startsWith('/api/')) return; // never cached
  if (request.mode === 'navigate') {
    if (url.pathname === '/' || url.pathname === '/index.html') {
      event.respondWith(networkFirst(request, '/'));
    }
    return;
  }
  if (SHELL_PATHS.has(url.pathname)) event.respondWith(networkFirst(request, url.pathname));
});
