// @ts-check
// Notes: search with "why this result", the note list with tag filters, one note to read,
// edit and tag, new notes, and documents (PDF, Word, text, markdown) added as notes.

import { ApiError, api, csrfToken, enc, get, notePath, post, put, query } from './api.js';
import { $, append, clear, h, plural, toast, when } from './dom.js';
import { showHtml } from './markdown.js';

function splitId(id, project) {
  if (project && id.startsWith(`${project}/`))
    return { project, name: id.slice(project.length + 1) };
  const slash = id.indexOf('/');
  return { project: id.slice(0, slash), name: id.slice(slash + 1) };
}

function number(value, digits = 3) {
  return typeof value === 'number' ? value.toFixed(digits) : '—';
}

function parseTags(text) {
  return text
    .split(/[,\s]+/)
    .map((tag) => tag.trim().replace(/^#/, ''))
    .filter(Boolean);
}

export function createNotes(app) {
  const view = $('#notes-view');
  const form = $('#search-form');
  const input = $('#search-input');
  const scopeSelect = $('#search-scope');
  const results = $('#notes-results');
  const statusLine = $('#notes-status');
  const tagFilterBox = $('#tag-filter');
  const pane = $('#note-pane');
  const newButton = $('#new-note');
  const documentButton = $('#add-document');
  const documentInput = $('#document-input');

  let channel = null;
  let scope = ''; // a project slug, or '' for every project
  let lastQuery = '';
  let tagFilter = null;
  let listed = [];
  let problems = []; // notes that could not be read: {path, reason}
  let openId = null;
  let generation = 0;

  // ------------------------------------------------------------ scope

  function fillScopes() {
    const options = [h('option', { value: '' }, 'All projects')];
    for (const project of app.projects)
      options.push(h('option', { value: project.slug }, project.name));
    scopeSelect.replaceChildren(...options);
    scopeSelect.value = scope;
  }

  function scopeSlugs() {
    return scope ? [scope] : app.projects.map((p) => p.slug);
  }

  scopeSelect.addEventListener('change', () => {
    scope = scopeSelect.value;
    tagFilter = null;
    refreshList();
  });

  // ------------------------------------------------------------ the list

  function tagButton(tag, { pressed = false } = {}) {
    return h(
      'button',
      {
        type: 'button',
        class: 'tag',
        'aria-pressed': String(pressed),
        title: `Show notes tagged #${tag}`,
        onclick: () => filterByTag(tag),
      },
      `#${tag}`,
    );
  }

  async function filterByTag(tag) {
    post('/api/usage', { kind: 'tag', tag }).catch((error) =>
      app.reportError(error, 'Tag use not recorded'),
    );
    tagFilter = tag;
    input.value = '';
    lastQuery = '';
    if (window.matchMedia('(max-width: 760px)').matches) closeNote();
    await refreshList();
  }

  function renderTagFilter() {
    const tags = [...new Set(listed.flatMap((note) => note.tags || []))].sort();
    tagFilterBox.hidden = lastQuery !== '' || tags.length === 0;
    clear(tagFilterBox);
    append(tagFilterBox, [
      h('span', { class: 'muted small' }, 'Tags: '),
      ...tags.map((tag) => tagButton(tag, { pressed: tag === tagFilter })),
      tagFilter
        ? h(
            'button',
            {
              type: 'button',
              class: 'link-button small',
              onclick: () => {
                tagFilter = null;
                renderList();
              },
            },
            'Show all',
          )
        : null,
    ]);
  }

  function noteRow(note) {
    return h(
      'li',
      { class: `note-row${note.id === openId ? ' current' : ''}`, dataset: { id: note.id } },
      h('a', { href: app.noteHref(channel, note.id), class: 'note-link' }, note.title || note.name),
      h(
        'div',
        { class: 'note-row-meta muted small' },
        scope ? null : `${note.project} · `,
        note.updated ? `updated ${when(note.updated)}` : '',
      ),
      note.tags && note.tags.length
        ? h(
            'div',
            { class: 'tags' },
            note.tags.map((tag) => tagButton(tag, { pressed: tag === tagFilter })),
          )
        : null,
    );
  }

  function renderList() {
    const shown = tagFilter
      ? listed.filter((note) => (note.tags || []).includes(tagFilter))
      : listed;
    renderTagFilter();
    results.replaceChildren(...shown.map(noteRow));
    if (!app.projects.length) {
      statusLine.textContent =
        'There are no projects yet, so no notes. Create a project in Settings.';
    } else if (!listed.length) {
      statusLine.textContent = scope
        ? `No notes in ${app.channelName(scope)} yet. Write one with “New note”, add a PDF or Word file with “Add document” (or drop it here), ask Charlie to note something, or drop markdown files into its notes folder.`
        : 'No notes yet in any project.';
    } else {
      statusLine.textContent = tagFilter
        ? `${plural(shown.length, 'note')} tagged #${tagFilter}`
        : `${plural(listed.length, 'note')}`;
    }
    if (problems.length) {
      results.append(
        h(
          'li',
          { class: 'callout callout-error small' },
          `${plural(problems.length, 'note')} could not be read and ${problems.length === 1 ? 'is' : 'are'} skipped: `,
          h(
            'ul',
            {},
            problems.map((p) => h('li', {}, h('code', {}, p.path), ` — ${p.reason}`)),
          ),
        ),
      );
    }
  }

  async function refreshList() {
    const mine = ++generation;
    lastQuery = '';
    statusLine.textContent = 'Loading notes…';
    try {
      const lists = await Promise.all(
        scopeSlugs().map((slug) => get(`/api/notes${query({ project: slug })}`)),
      );
      if (mine !== generation) return;
      // The API answers {notes, problems} (docs/api.md once said a bare list): take either.
      problems = lists.flatMap((answer) => (Array.isArray(answer) ? [] : answer.problems || []));
      listed = lists
        .flatMap((answer) => (Array.isArray(answer) ? answer : answer.notes || []))
        .sort((a, b) => String(b.updated || '').localeCompare(String(a.updated || '')));
      renderList();
    } catch (error) {
      if (mine !== generation) return;
      results.replaceChildren();
      statusLine.textContent = '';
      statusLine.append(app.errorText(error, 'The notes could not be loaded'));
    }
  }

  // ------------------------------------------------------------ search

  function whyElement(result) {
    const causes = result.boost_causes || [];
    return h(
      'details',
      { class: 'why' },
      h('summary', {}, 'Why this result'),
      h('p', { class: 'why-line' }, result.why),
      result.terms && result.terms.length
        ? h(
            'p',
            { class: 'small' },
            'Matched words: ',
            result.terms.map((term) => h('span', { class: 'term' }, term)),
          )
        : null,
      h(
        'dl',
        { class: 'facts small' },
        h('dt', {}, 'score'),
        h('dd', {}, number(result.score)),
        h('dt', {}, 'similarity'),
        h('dd', {}, number(result.similarity)),
        h('dt', {}, 'meaning (cosine)'),
        h(
          'dd',
          {},
          result.vector === null || result.vector === undefined
            ? 'not used'
            : number(result.vector),
        ),
        h('dt', {}, 'words (BM25)'),
        h(
          'dd',
          {},
          result.bm25 === null || result.bm25 === undefined
            ? 'no keyword hit'
            : number(result.bm25, 2),
        ),
        h('dt', {}, 'your usage boost'),
        h('dd', {}, result.boost ? number(result.boost, 2) : 'none'),
      ),
      causes.length
        ? h(
            'div',
            { class: 'small' },
            'Boosted because: ',
            h(
              'ul',
              { class: 'causes' },
              causes.map((cause) => h('li', {}, cause)),
            ),
          )
        : null,
    );
  }

  function resultRow(result) {
    return h(
      'li',
      {
        class: `note-row result${result.id === openId ? ' current' : ''}`,
        dataset: { id: result.id },
      },
      h(
        'div',
        { class: 'result-head' },
        h('a', { href: app.noteHref(channel, result.id), class: 'note-link' }, result.title),
        h('span', { class: 'score', title: 'Score' }, number(result.score, 2)),
      ),
      h('div', { class: 'note-row-meta muted small' }, result.id),
      result.snippet ? h('p', { class: 'snippet small' }, result.snippet) : null,
      whyElement(result),
    );
  }

  async function search(text) {
    const mine = ++generation;
    lastQuery = text;
    tagFilterBox.hidden = true;
    statusLine.textContent = 'Searching…';
    try {
      /** @type {import('./api-types.js').SearchOut} */
      const found = await get(`/api/search${query({ q: text, project: scope, limit: 20 })}`);
      if (mine !== generation) return;
      results.replaceChildren(...found.results.map(resultRow));
      const parts = [
        found.results.length
          ? `${plural(found.results.length, 'result')} for “${found.query}”`
          : `Nothing found for “${found.query}”.`,
        `mode: ${found.mode}`,
      ];
      if (found.fallback_reason) parts.push(`keyword search joined: ${found.fallback_reason}`);
      if (found.incomplete) {
        parts.push('the search index is still being filled: some notes may be missing');
        app.indexIncomplete(found.incomplete);
      }
      statusLine.textContent = parts.join(' · ');
    } catch (error) {
      if (mine !== generation) return;
      results.replaceChildren();
      statusLine.textContent = '';
      statusLine.append(app.errorText(error, 'The search failed'));
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = input.value.trim();
    tagFilter = null;
    if (text) search(text);
    else refreshList();
  });
  input.addEventListener('search', () => {
    if (!input.value.trim() && lastQuery) refreshList();
  });

  // ------------------------------------------------------------ one note

  function closeNote() {
    openId = null;
    view.classList.remove('note-open');
    pane.replaceChildren(h('p', { class: 'empty' }, 'Pick a note to read it here.'));
    for (const row of results.querySelectorAll('.current')) row.classList.remove('current');
  }

  function markCurrent() {
    for (const row of results.querySelectorAll('.note-row'))
      row.classList.toggle('current', row.dataset.id === openId);
  }

  function tagEditor(note) {
    const field = h('input', { id: 'note-tag-input', placeholder: 'new-tag', autocomplete: 'off' });
    const tagForm = h(
      'form',
      { class: 'tag-form' },
      h('label', { for: 'note-tag-input', class: 'visually-hidden' }, 'Add a tag'),
      field,
      h('button', { type: 'submit', class: 'button-small' }, 'Add tag'),
    );
    tagForm.addEventListener('submit', async (event) => {
      event.preventDefault();
      const add = parseTags(field.value);
      if (add.length) await changeTags(note, { add, remove: [] });
    });
    return tagForm;
  }

  async function changeTags(note, change) {
    try {
      const { project, name } = splitId(note.id, note.project);
      await post(`/api/notes/${enc(project)}/${notePath(name)}/tags`, change);
      await loadNote(note.id, { focus: '#note-tag-input' });
      if (!lastQuery) refreshList();
    } catch (error) {
      app.reportError(error, 'The tags could not be changed');
    }
  }

  // Deleting moves the note to the trash (Settings → Trash brings it back). The first press
  // asks; the second, within 5 s, deletes.
  function deleteButton(note) {
    const button = h('button', { type: 'button', class: 'button-small button-danger' }, 'Delete');
    let armed = null;
    button.addEventListener('click', async () => {
      if (!armed) {
        button.textContent = 'Move to trash?';
        armed = setTimeout(() => {
          armed = null;
          button.textContent = 'Delete';
        }, 5000);
        return;
      }
      clearTimeout(armed);
      button.disabled = true;
      const { project, name } = splitId(note.id, note.project);
      try {
        await api('DELETE', `/api/notes/${enc(project)}/${notePath(name)}`);
        toast(`“${note.title || note.name}” is in the trash; Settings → Trash brings it back.`);
        app.navigate('notes', channel);
        refreshList();
      } catch (error) {
        button.disabled = false;
        app.reportError(error, 'The note could not be deleted');
      }
    });
    return button;
  }

  function renderNote(note) {
    const tags = note.tags || [];
    pane.replaceChildren(
      h(
        'div',
        { class: 'note-head' },
        h(
          'button',
          {
            type: 'button',
            class: 'button-quiet button-small back',
            onclick: () => app.navigate('notes', channel),
          },
          '← All notes',
        ),
        h('h2', { id: 'note-title', tabindex: '-1' }, note.title || note.name),
        h(
          'p',
          { class: 'muted small' },
          h('code', {}, note.id),
          note.updated ? ` · updated ${when(note.updated)}` : '',
        ),
        h(
          'div',
          { class: 'actions' },
          h(
            'button',
            { type: 'button', class: 'button-small', onclick: () => editNote(note) },
            'Edit',
          ),
          originalLink(note),
          deleteButton(note),
        ),
      ),
      h(
        'div',
        { class: 'tags note-tags', 'aria-label': 'Tags' },
        tags.map((tag) =>
          h(
            'span',
            { class: 'tag-pair' },
            tagButton(tag),
            h(
              'button',
              {
                type: 'button',
                class: 'tag-remove',
                'aria-label': `Remove tag ${tag}`,
                onclick: () => changeTags(note, { add: [], remove: [tag] }),
              },
              '×',
            ),
          ),
        ),
        tagEditor(note),
      ),
      note.body
        ? showHtml(h('div', { class: 'md note-body' }), note.html)
        : h('div', { class: 'md note-body' }, h('p', { class: 'empty' }, 'This note is empty.')),
    );
  }

  function editNote(note) {
    const title = h('input', { id: 'note-edit-title', required: true });
    title.value = note.title || '';
    const body = h('textarea', { id: 'note-edit-body', rows: 16 });
    body.value = note.body || '';
    const editForm = h(
      'form',
      { class: 'note-editor' },
      h('h2', {}, 'Edit note'),
      h('label', { for: 'note-edit-title' }, 'Title'),
      title,
      h('label', { for: 'note-edit-body' }, 'Text (markdown)'),
      body,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'button-primary' }, 'Save'),
        h(
          'button',
          { type: 'button', class: 'button-quiet', onclick: () => renderNote(note) },
          'Cancel',
        ),
      ),
    );
    editForm.addEventListener('submit', async (event) => {
      event.preventDefault();
      const { project, name } = splitId(note.id, note.project);
      try {
        const saved = await put(`/api/notes/${enc(project)}/${notePath(name)}`, {
          title: title.value.trim(),
          body: body.value,
          base_sha256: note.sha256, // 409 if the file changed since it was loaded
        });
        toast('Note saved.');
        if (saved && saved.id && saved.id !== note.id) app.navigate('notes', channel, saved.id);
        else await loadNote(note.id, { focus: '#note-title' });
        if (!lastQuery) refreshList();
      } catch (error) {
        app.reportError(error, 'The note could not be saved');
      }
    });
    pane.replaceChildren(editForm);
    title.focus();
  }

  async function loadNote(id, { focus = null } = {}) {
    const mine = generation;
    openId = id;
    view.classList.add('note-open');
    markCurrent();
    const { project, name } = splitId(id);
    try {
      /** @type {import('./api-types.js').NoteFull} */
      const note = await get(`/api/notes/${enc(project)}/${notePath(name)}`);
      if (openId !== id) return;
      renderNote({ ...note, id: note.id || id, project: note.project || project });
      const target = focus ? pane.querySelector(focus) : null;
      if (target) target.focus();
    } catch (error) {
      if (openId !== id || mine !== generation) return;
      pane.replaceChildren(app.errorText(error, 'The note could not be opened'));
    }
  }

  // ------------------------------------------------------------ new note

  function newNoteForm() {
    const slugs = app.projects;
    if (!slugs.length) {
      toast('Create a project first (Settings), then notes can live in it.', 'error');
      return;
    }
    openId = null;
    markCurrent();
    view.classList.add('note-open');
    const projectSelect = h(
      'select',
      { id: 'new-note-project' },
      slugs.map((p) => h('option', { value: p.slug }, p.name)),
    );
    projectSelect.value = scope || app.currentProject() || slugs[0].slug;
    const title = h('input', { id: 'new-note-title', required: true });
    const body = h('textarea', { id: 'new-note-body', rows: 10 });
    const tags = h('input', { id: 'new-note-tags', placeholder: 'kitchen, budget' });
    const errorLine = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const noteForm = h(
      'form',
      { class: 'note-editor' },
      h('h2', {}, 'New note'),
      h('label', { for: 'new-note-project' }, 'Project'),
      projectSelect,
      h('label', { for: 'new-note-title' }, 'Title'),
      title,
      h('label', { for: 'new-note-body' }, 'Text (markdown)'),
      body,
      h(
        'label',
        { for: 'new-note-tags' },
        'Tags ',
        h('span', { class: 'hint' }, '(comma-separated)'),
      ),
      tags,
      errorLine,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'button-primary' }, 'Create note'),
        h(
          'button',
          { type: 'button', class: 'button-quiet', onclick: () => app.navigate('notes', channel) },
          'Cancel',
        ),
      ),
    );
    noteForm.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (!title.value.trim()) {
        errorLine.hidden = false;
        errorLine.textContent = 'Give the note a title.';
        title.focus();
        return;
      }
      try {
        const note = await post('/api/notes', {
          project: projectSelect.value,
          title: title.value.trim(),
          body: body.value,
          tags: parseTags(tags.value),
        });
        toast('Note created.');
        await refreshList();
        app.navigate('notes', channel, note.id || `${projectSelect.value}/${note.name}`);
      } catch (error) {
        errorLine.hidden = false;
        errorLine.textContent = error.message;
      }
    });
    pane.replaceChildren(noteForm);
    title.focus();
  }

  newButton.addEventListener('click', newNoteForm);

  // ------------------------------------------------------------ documents in

  // The server's limit (charlie/document_text.py, Limits.max_bytes): checked here first so a
  // file too big is refused at once, not after minutes of uploading.
  const MAX_DOCUMENT_MB = 25;
  let documentPanel = null; // {projectSelect, choose, progress, status, errorLine} once shown
  let uploading = false;
  // The first line of a note made from a document: "Original: [name](../attachments/file)".
  const ORIGINAL_LINK = /^Original: \[(?:[^\]\\]|\\.)*\]\(\.\.\/attachments\/([^)\s/]+)\)/;

  /** The "Original file" download of a note made from a document (its first line links it). */
  function originalLink(note) {
    const match = ORIGINAL_LINK.exec(note.body || '');
    if (!match) return null;
    const { project } = splitId(note.id, note.project);
    let name;
    try {
      name = decodeURIComponent(match[1]);
    } catch {
      return null;
    }
    return h(
      'a',
      {
        class: 'button button-small',
        href: `/api/attachments/${enc(project)}/${enc(name)}`,
        download: name,
      },
      'Original file',
    );
  }

  function defaultProject() {
    return scope || app.currentProject() || (app.projects[0] && app.projects[0].slug);
  }

  /** The "Add a document" panel in the note pane: where to, a drop zone, progress, errors. */
  function documentForm() {
    if (!app.projects.length) {
      toast('Create a project first (Settings), then documents can become its notes.', 'error');
      return null;
    }
    openId = null;
    markCurrent();
    view.classList.add('note-open');
    const projectSelect = h(
      'select',
      { id: 'document-project' },
      app.projects.map((p) => h('option', { value: p.slug }, p.name)),
    );
    projectSelect.value = defaultProject();
    const choose = h(
      'button',
      { type: 'button', class: 'button-primary', onclick: () => documentInput.click() },
      'Choose a file…',
    );
    const progress = h('progress', {
      id: 'document-progress',
      max: '1',
      value: '0',
      hidden: true,
      'aria-label': 'Upload progress',
    });
    const status = h('p', { class: 'small', id: 'document-status', role: 'status' });
    const errorLine = h('div', {
      class: 'form-error',
      id: 'document-error',
      role: 'alert',
      hidden: true,
    });
    const zone = h(
      'div',
      { class: 'drop-zone' },
      h('p', {}, 'Drop a PDF, Word (.docx), text or markdown file here, or'),
      choose,
      h(
        'p',
        { class: 'hint small' },
        `Up to ${MAX_DOCUMENT_MB} MB. Its text becomes a note you can search; the file ` +
          'itself is kept beside it. Scanned PDFs need OCR first.',
      ),
    );
    pane.replaceChildren(
      h(
        'section',
        { class: 'note-editor document-form', 'aria-labelledby': 'document-heading' },
        h('h2', { id: 'document-heading' }, 'Add a document'),
        h('label', { for: 'document-project' }, 'Project'),
        projectSelect,
        zone,
        progress,
        status,
        errorLine,
        h(
          'div',
          { class: 'actions' },
          h(
            'button',
            {
              type: 'button',
              class: 'button-quiet',
              onclick: () => app.navigate('notes', channel),
            },
            'Close',
          ),
        ),
      ),
    );
    documentPanel = { projectSelect, status, progress, errorLine, choose };
    return documentPanel;
  }

  function openDocumentForm() {
    if (documentForm()) documentPanel.choose.focus();
  }

  /** POST one file as multipart, reporting upload progress (fetch cannot); → the answer. */
  function sendDocument(project, file, onProgress) {
    return new Promise((resolve, reject) => {
      const form = new FormData();
      form.append('project', project);
      form.append('file', file, file.name);
      const request = new XMLHttpRequest();
      request.open('POST', '/api/notes/upload');
      request.setRequestHeader('Accept', 'application/json');
      request.setRequestHeader('X-CSRF-Token', csrfToken());
      request.upload.addEventListener('progress', (event) => {
        if (event.lengthComputable) onProgress(event.loaded / event.total);
      });
      request.upload.addEventListener('load', () => onProgress(1));
      request.addEventListener('load', () => {
        let data = null;
        try {
          data = JSON.parse(request.responseText);
        } catch {
          // not JSON: a proxy's error page; the status says enough
        }
        if (request.status >= 200 && request.status < 300 && data) resolve(data);
        else if (request.status === 413 && !(data && data.kind === 'DocumentTooLarge'))
          reject(
            new ApiError(
              413,
              'TooLarge',
              `${file.name} was not added: it is larger than the ${MAX_DOCUMENT_MB} MB ` +
                'Charlie takes.',
            ),
          );
        else
          reject(
            new ApiError(
              request.status,
              (data && data.kind) || `HTTP${request.status}`,
              (data && data.error) ||
                `The server answered ${request.status} ${request.statusText}.`,
            ),
          );
      });
      request.addEventListener('error', () =>
        reject(
          new ApiError(
            0,
            'Offline',
            "Can't reach Charlie's server. Check the connection, then try again.",
          ),
        ),
      );
      request.send(form);
    });
  }

  async function addDocuments(files) {
    if (!files.length) return;
    if (uploading) {
      toast('A document is still being added; add this one when it is done.', 'error');
      return;
    }
    const showing = documentPanel && pane.contains(documentPanel.status);
    const panel = showing ? documentPanel : documentForm();
    if (!panel) return;
    const project = panel.projectSelect.value;
    uploading = true;
    panel.errorLine.hidden = true;
    panel.errorLine.replaceChildren();
    const failures = [];
    let made = null;
    for (const file of files) {
      panel.progress.hidden = false;
      panel.progress.value = 0;
      pane.setAttribute('aria-busy', 'true');
      try {
        if (file.size > MAX_DOCUMENT_MB * 1024 * 1024) {
          const mb = (file.size / 1024 / 1024).toFixed(1);
          throw new Error(
            `${file.name} was not added: it is ${mb} MB, and Charlie takes documents of ` +
              `up to ${MAX_DOCUMENT_MB} MB.`,
          );
        }
        panel.status.textContent = `Uploading ${file.name}…`;
        const answer = await sendDocument(project, file, (share) => {
          panel.progress.value = share;
          panel.status.textContent =
            share < 1
              ? `Uploading ${file.name}… ${Math.round(share * 100)}%`
              : `Reading and indexing ${file.name}…`;
        });
        made = answer.note;
        toast(`Added ${file.name} as the note “${answer.note.title}”.`);
        if (answer.warning) toast(answer.warning, 'error');
      } catch (error) {
        if (error.status === 0) app.markOffline(error.message);
        failures.push(error.message);
      }
    }
    uploading = false;
    pane.removeAttribute('aria-busy');
    documentInput.value = '';
    if (made) await refreshList();
    if (failures.length) {
      panel.progress.hidden = true;
      panel.status.textContent = made ? 'The other documents were added.' : '';
      panel.errorLine.hidden = false;
      panel.errorLine.replaceChildren(
        ...failures.map((message) => h('p', { class: 'document-failure' }, message)),
      );
      return;
    }
    if (made) app.navigate('notes', channel, made.id);
  }

  documentButton.addEventListener('click', openDocumentForm);
  documentInput.addEventListener('change', () => addDocuments([...documentInput.files]));

  // Dropping files anywhere on the notes view adds them (into the panel's project).
  let dragDepth = 0;
  const carriesFiles = (event) => [...(event.dataTransfer?.types || [])].includes('Files');
  view.addEventListener('dragenter', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth += 1;
    view.classList.add('dropping');
  });
  view.addEventListener('dragover', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = 'copy';
  });
  view.addEventListener('dragleave', () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) view.classList.remove('dropping');
  });
  view.addEventListener('drop', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth = 0;
    view.classList.remove('dropping');
    addDocuments([...event.dataTransfer.files]);
  });

  // ------------------------------------------------------------ entry

  /** Show the notes of `nextChannel` (all projects for the private channel), and a note. */
  let showing = 0;

  async function show(nextChannel, noteId = null) {
    const mine = ++showing;
    if (nextChannel !== channel) {
      channel = nextChannel;
      scope = app.isPrivate(channel) ? '' : channel;
      tagFilter = null;
      input.value = '';
      fillScopes();
      closeNote();
      await refreshList();
      if (mine !== showing) return; // a later navigation has taken over
    } else {
      fillScopes();
    }
    if (noteId && noteId !== openId) await loadNote(noteId, { focus: '#note-title' });
    else if (!noteId && openId) closeNote();
  }

  function reset() {
    channel = null;
  }

  return { show, reset };
}
