// @ts-check
// Charlie's web app: sign-in, the project switcher, routing between Chat, Notes and
// Settings, and the app-wide states (offline, language model unreachable).

import { api, get, hasSessionHint, post, whenSignedOut } from './api.js';
import { createChat } from './chat.js';
import { $, bringIntoView, h, toast } from './dom.js';
import { createMemory } from './memory.js';
import { createModelOffer } from './model.js';
import { createNotes } from './notes.js';
import { createRecall } from './recall.js';
import { createSettings } from './settings.js';
import { createThreads } from './threads.js';
import { createVoice } from './voice.js';

const VIEWS = ['chat', 'notes', 'settings'];
const PRIVATE = 'private';
const REMEMBERED = 'charlie.channel';
const HEALTH_EVERY_MS = 60_000;
const INDEX_CHECK_MS = 5_000; // while the search index is being filled
// Offline, or Charlie's server unreachable: asked again by itself, ever less often. The
// browser's "online" event comes only when the device's own network returns, not when the
// server does (nor, in every browser, when the device's network does).
const RECONNECT_FIRST_MS = 3_000;
const RECONNECT_MOST_MS = 30_000;

const screens = {
  loading: $('#loading-view'),
  offline: $('#offline-view'),
  signin: $('#signin-view'),
  chat: $('#chat-view'),
  notes: $('#notes-view'),
  settings: $('#settings-view'),
};

// The last channel shown, for the next visit (a slug is all that is kept in the browser).
function remembered() {
  try {
    return localStorage.getItem(REMEMBERED);
  } catch {
    return null; // storage can be switched off
  }
}

function remember(channel) {
  try {
    localStorage.setItem(REMEMBERED, channel);
  } catch {
    // Not kept: the app opens on the private channel next time.
  }
}

let serverUnreachable = false;
let healthTimer = 0;
let reconnectTimer = 0;
let reconnectDelay = RECONNECT_FIRST_MS;
let chatChannel = null; // the channel the chat and memory panes show

const app = {
  user: null,
  projects: [],
  health: null,
  view: 'chat',
  channel: PRIVATE,

  isPrivate: (channel) => channel === PRIVATE,
  channelName(channel) {
    if (channel === PRIVATE) return 'Private';
    const project = app.projects.find((p) => p.slug === channel);
    return project ? project.name : channel;
  },
  currentProject: () => (app.channel === PRIVATE ? null : app.channel),
  online: () => navigator.onLine && !serverUnreachable,

  href(view, channel = app.channel, noteId = null) {
    const parts = [view, encodeURIComponent(channel)];
    if (noteId) parts.push(...noteId.split('/').map(encodeURIComponent));
    return `#/${parts.join('/')}`;
  },
  noteHref: (channel, noteId) => app.href('notes', channel, noteId),
  navigate(view, channel = app.channel, noteId = null) {
    const target = app.href(view, channel, noteId);
    if (location.hash === target) route();
    else location.hash = target;
  },
  openNote: (noteId) => app.navigate('notes', app.channel, noteId),

  errorText(error, what) {
    if (error && error.status === 0) app.markOffline(error.message);
    return h('span', { class: 'error-text', role: 'alert' }, `${what}: ${error.message}`);
  },
  reportError(error, what) {
    if (error && error.status === 0) app.markOffline(error.message);
    toast(`${what}: ${error.message}`, 'error');
  },
  markOffline(message) {
    serverUnreachable = true;
    showOfflineBanner(message);
    reconnectLater();
  },
  llmProblem(message) {
    showLlmBanner(message);
    modelOffer.unreachable();
    clearTimeout(healthTimer);
    healthTimer = setTimeout(checkHealth, 15_000);
  },
  // A search said the index is still being filled: say so until the health check says done.
  indexIncomplete(message) {
    showIndexBanner(message);
    clearTimeout(healthTimer);
    healthTimer = setTimeout(checkHealth, INDEX_CHECK_MS);
  },
  // A reply came through: whatever the banner said about the model is over.
  llmRecovered() {
    $('#llm-banner').hidden = true;
    modelOffer.reachable();
  },
  memoryUpdated: () => memory.distilled(),
  projectChanged(saved) {
    app.projects = app.projects.map((p) => (p.slug === saved.slug ? saved : p));
    fillChannels();
    route();
  },
  async projectCreated(project) {
    await loadProjects();
    app.navigate('chat', project.slug);
  },
  // A project was deleted or restored: list them again and show `view` of `channel`.
  async projectsChanged(view, channel) {
    await loadProjects();
    chatChannel = null;
    app.navigate(view, app.projects.some((p) => p.slug === channel) ? channel : PRIVATE);
  },
};

const chat = createChat(app);
const threads = createThreads(app, chat);
const recall = createRecall(app, chat, threads);
const memory = createMemory(app);
const notes = createNotes(app);
const settings = createSettings(app);
const voice = createVoice(app, chat);
const modelOffer = createModelOffer(app);

// ------------------------------------------------------------ screens

function showScreen(name) {
  for (const [key, element] of Object.entries(screens)) element.hidden = key !== name;
  const signedIn = Boolean(app.user);
  $('#channel-picker').hidden = !signedIn;
  $('#sections').hidden = !signedIn;
  $('#account').hidden = !signedIn;
  document.body.dataset.screen = name;
}

function showOfflineBanner(message) {
  $('#offline-text').textContent =
    message ||
    "Charlie's server can't be reached. Chat, memory and notes come back when the connection does.";
  $('#offline-banner').hidden = false;
}

function hideOfflineBanner() {
  serverUnreachable = false;
  $('#offline-banner').hidden = true;
  clearTimeout(reconnectTimer);
  reconnectDelay = RECONNECT_FIRST_MS;
}

function reconnectLater() {
  clearTimeout(reconnectTimer);
  reconnectTimer = setTimeout(() => {
    reconnectDelay = Math.min(2 * reconnectDelay, RECONNECT_MOST_MS);
    if (app.user) checkHealth(); // hides the banner once the server answers
    else if (document.body.dataset.screen === 'offline') start(); // the app never opened
    else reachable(); // the sign-in form stays as it is, with what was typed in it
  }, reconnectDelay);
}

async function reachable() {
  try {
    await get('/api/me');
  } catch (error) {
    if (error.status === 0) {
      reconnectLater();
      return;
    }
  }
  hideOfflineBanner(); // any answer, "not signed in" too: the server is there
}

function showLlmBanner(message, title = 'Language model unreachable.') {
  $('#llm-banner').classList.remove('open'); // on a phone, the details wait for a tap
  $('#llm-details').setAttribute('aria-expanded', 'false');
  $('#llm-title').textContent = title;
  $('#llm-text').textContent =
    `${message || 'The model server did not answer.'} Replies will fail until it is back; ` +
    'memory and notes still work.';
  $('#llm-banner').hidden = false;
}

// "indexing history: 41 %" → "Indexing history: 41 %."
const sentence = (line) => line.charAt(0).toUpperCase() + line.slice(1) + '.';

function showIndexBanner(message) {
  $('#index-text').textContent = message;
  $('#index-banner').hidden = false;
}

function showOffline() {
  showOfflineBanner(
    navigator.onLine ? undefined : 'This device has no network. You are looking at the saved app.',
  );
  showScreen(app.user ? app.view : 'offline');
  reconnectLater();
}

// ------------------------------------------------------------ projects and routing

function fillChannels() {
  const select = $('#channel-select');
  const options = [h('option', { value: PRIVATE }, 'Private (only you)')];
  if (app.projects.length) {
    options.push(
      h(
        'optgroup',
        { label: 'Shared projects' },
        app.projects.map((p) => h('option', { value: p.slug }, p.name)),
      ),
    );
  }
  select.replaceChildren(...options);
  select.value = app.channel;
}

async function loadProjects() {
  const listed = await get('/api/projects');
  app.projects = listed.projects;
  for (const problem of listed.problems) {
    toast(`A project was skipped: ${problem.path}: ${problem.reason}`, 'error');
  }
  app.projects.sort((a, b) => a.name.localeCompare(b.name));
  fillChannels();
}

function parseHash() {
  const parts = location.hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map(decodeURIComponent);
  const view = VIEWS.includes(parts[0]) ? parts[0] : 'chat';
  const channel = parts[1] || remembered() || PRIVATE;
  const noteId = parts.length > 2 ? parts.slice(2).join('/') : null;
  const thread = view === 'chat' ? parts[2] : undefined; // a thread id, or "new"
  return { view, channel, noteId, thread, named: Boolean(parts[1]) };
}

async function route() {
  if (!app.user) return;
  const wanted = parseHash();
  const { view, noteId } = wanted;
  let { channel } = wanted;
  if (channel !== PRIVATE && !app.projects.some((p) => p.slug === channel)) {
    if (wanted.named)
      toast(`There is no project “${channel}”; showing your private channel.`, 'error');
    channel = PRIVATE;
  }
  app.view = view;
  app.channel = channel;
  remember(channel);
  $('#channel-select').value = channel;
  for (const link of document.querySelectorAll('#sections a')) {
    if (!(link instanceof HTMLAnchorElement)) continue;
    link.href = app.href(link.dataset.view, channel);
    if (link.dataset.view === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${app.channelName(channel)} · ${view[0].toUpperCase()}${view.slice(1)} · Charlie`;
  showScreen(view);
  if (view === 'chat') {
    if (chatChannel !== channel) {
      chatChannel = channel;
      recall.follow(channel);
      await Promise.all([
        threads.open(channel, wanted.thread, { reload: true }),
        memory.open(channel),
      ]);
    } else {
      await threads.open(channel, wanted.thread); // another chat of the channel, perhaps
    }
  } else if (view === 'notes') {
    await notes.show(channel, noteId);
  } else {
    settings.show(channel);
  }
}

window.addEventListener('hashchange', () => {
  route();
});

$('#channel-select').addEventListener('change', (event) => {
  app.navigate(app.view === 'notes' ? 'notes' : app.view, event.target.value);
});

// ------------------------------------------------------------ health

async function checkHealth() {
  clearTimeout(healthTimer);
  if (!app.user) return;
  try {
    app.health = await get('/api/health');
    hideOfflineBanner();
    const llm = app.health.llm || {};
    if (!llm.reachable) {
      const where = llm.base_url ? ` at ${llm.base_url}` : '';
      showLlmBanner(llm.error || `Charlie can't reach the model server${where}.`);
      modelOffer.unreachable(); // an administrator is offered the built-in model
    } else if (llm.error) {
      showLlmBanner(llm.error, 'Language model problem.'); // reachable, but no such model
      modelOffer.reachable();
    } else {
      $('#llm-banner').hidden = true;
      modelOffer.reachable();
    }
    const index = app.health.index || {};
    if (index.incomplete) showIndexBanner(index.incomplete);
    else $('#index-banner').hidden = true;
    const history = app.health.history;
    $('#history-banner').hidden = !history || history.done;
    $('#history-text').textContent = history && !history.done ? sentence(history.line) : '';
    settings.renderHealth();
  } catch (error) {
    if (error.status === 0) app.markOffline();
  } finally {
    const health = app.health;
    const filling =
      health && ((health.index && health.index.incomplete) || (health.history && !health.history.done));
    if (app.user) healthTimer = setTimeout(checkHealth, filling ? INDEX_CHECK_MS : HEALTH_EVERY_MS);
  }
}

$('#llm-retry').addEventListener('click', checkHealth);
$('#llm-details').addEventListener('click', () => {
  const open = $('#llm-banner').classList.toggle('open');
  $('#llm-details').setAttribute('aria-expanded', String(open));
});

// The history opens at the end of the memory pane: bring it into view (the pane's own
// listener has just shown it), and again once it has loaded — scrolling the pane alone.
$('#memory-history-toggle').addEventListener('click', () => {
  const history = $('#memory-history');
  if (history.hidden) return;
  const bring = () => bringIntoView(history);
  bring();
  const loaded = new MutationObserver(() => {
    if ($('#history-list').textContent.includes('Loading')) return;
    loaded.disconnect();
    bring();
  });
  loaded.observe($('#history-list'), { childList: true });
  setTimeout(() => loaded.disconnect(), 10_000);
});

// ------------------------------------------------------------ signing in and out

function resetViews() {
  chatChannel = null;
  voice.stop();
  chat.abort();
  notes.reset();
}

function showSignIn(message) {
  app.user = null;
  clearTimeout(healthTimer);
  resetViews();
  showScreen('signin');
  const error = $('#signin-error');
  error.hidden = !message;
  error.textContent = message || '';
  $('#signin-name').focus();
  checkFirstRun();
}

// A household with no one yet: say how the first account is made (on the server's machine).
async function checkFirstRun() {
  try {
    const household = await api('GET', '/api/household', undefined, { signedIn: false });
    $('#signin-first-run').hidden = household.has_people;
    return household.has_people;
  } catch {
    return true; // unknown (offline, say): the form alone, as before
  }
}

whenSignedOut(() => {
  if (app.user) showSignIn('Your session has ended. Sign in again to go on.');
});

async function enter() {
  $('#who').textContent = app.user.name;
  try {
    await loadProjects();
  } catch (error) {
    if (!app.user) return;
    if (error.status === 0) {
      showOffline();
      return;
    }
    toast(`The projects could not be loaded: ${error.message}`, 'error');
  }
  checkHealth();
  voice.check();
  await route();
}

$('#signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const name = $('#signin-name').value.trim();
  const password = $('#signin-password').value;
  const error = $('#signin-error');
  const submit = $('#signin-submit');
  if (!name || !password) {
    error.hidden = false;
    error.textContent = 'Enter your name and your password.';
    (name ? $('#signin-password') : $('#signin-name')).focus();
    return;
  }
  submit.disabled = true;
  error.hidden = true;
  try {
    const answer = await api('POST', '/api/login', { name, password }, { signedIn: false });
    app.user = answer.user;
    $('#signin-password').value = '';
    await enter();
    // The composer takes the focus only if the person has not put it somewhere meanwhile
    // (the search box, a link): typing there must not land in the message box.
    const focused = document.activeElement;
    const untouched = !focused || focused === document.body || $('#signin-form').contains(focused);
    if (app.view === 'chat' && untouched) chat.focus();
  } catch (failure) {
    error.hidden = false;
    if (failure.status === 401 && !(await checkFirstRun())) error.hidden = true;
    else if (failure.status === 401) error.textContent = 'Wrong name or password.';
    else if (failure.status === 0) error.textContent = `${failure.message}`;
    else error.textContent = failure.message;
    $('#signin-password').select();
  } finally {
    submit.disabled = false;
  }
});

$('#sign-out').addEventListener('click', async () => {
  try {
    await post('/api/logout');
  } catch (error) {
    if (error.status !== 401) {
      app.reportError(error, 'Signing out failed');
      return;
    }
  }
  // A fresh page: nothing of this person's stays in memory for the next one.
  location.replace('/');
});

// ------------------------------------------------------------ start

async function boot() {
  showScreen('loading');
  if (!navigator.onLine) {
    showOffline();
    return;
  }
  if (!hasSessionHint()) {
    showSignIn();
    return;
  }
  await start();
}

async function start() {
  try {
    app.user = await get('/api/me');
  } catch (error) {
    if (error.status === 0) {
      showOffline();
      return;
    }
    hideOfflineBanner();
    if (error.status === 401) showSignIn();
    else {
      showScreen('loading');
      screens.loading.replaceChildren(
        h('p', { class: 'callout callout-error' }, `Charlie could not start: ${error.message}`),
      );
    }
    return;
  }
  hideOfflineBanner();
  await enter();
}

function retry() {
  hideOfflineBanner();
  if (!app.user) boot();
  else {
    checkHealth();
    chatChannel = null;
    route();
  }
}

$('#offline-retry').addEventListener('click', retry);
$('#offline-view-retry').addEventListener('click', retry);
window.addEventListener('online', retry);
window.addEventListener('offline', () => showOffline());
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && app.user && navigator.onLine) checkHealth();
});

if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('/sw.js').catch((error) => {
    console.warn('Charlie works without its offline shell here:', error.message);
  });
}

boot();
