// @ts-check
// Settings: the current project's response style, cadence, model and allowed write tools; new
// projects; tokens for other apps; what this Charlie is connected to; and, from
// household.js, your account, the household's people (administrators) and the trash.

import { api, enc, get, patch, post, put } from './api.js';
import { $, bringIntoView, h, toast, when } from './dom.js';
import { createHousehold } from './household.js';
import { voiceCard } from './voice.js';

export const WRITE_TOOLS = [
  { name: 'create_note', label: 'Create notes' },
  { name: 'append_to_note', label: 'Append to notes' },
  { name: 'tag_note', label: 'Tag notes' },
  { name: 'record_decision', label: 'Record decisions in memory' },
];

export function createSettings(app) {
  const box = $('#project-settings');
  const health = $('#health-details');
  const newForm = $('#new-project-form');
  const newName = $('#new-project-name');
  const newStyle = $('#new-project-style');
  const newError = $('#new-project-error');

  // The row of groups stays at the top as the settings scroll: whatever is brought into view
  // there — a group's heading, a field reached with Tab — comes below it, never under it. Its
  // height (two rows on a phone) is the view's scroll padding, kept as the row resizes.
  const view = $('#settings-view');
  const rowSize = new ResizeObserver(([entry]) => {
    const below = entry.target.getBoundingClientRect().height;
    view.style.setProperty('--settings-nav-height', `${Math.ceil(below)}px`);
  });
  function coveredBy(nav) {
    rowSize.disconnect();
    rowSize.observe(nav);
  }

  const doctor = createDoctor();
  health.after(doctor.panel);
  const about = health.closest('section');
  const appTokens = createTokens();
  const household = createHousehold(app);

  function field(id, label, control, hint) {
    return [
      h('label', { for: id }, label, hint ? h('span', { class: 'hint' }, ` ${hint}`) : null),
      control,
    ];
  }

  function projectForm(project) {
    const name = h('input', { id: 'setting-name', required: true, maxlength: 200 });
    name.value = project.name;
    const style = h('textarea', {
      id: 'setting-style',
      rows: 3,
      placeholder: 'Brief, practical; metric units.',
    });
    style.value = project.style || '';
    const persona = h('textarea', {
      id: 'setting-persona',
      rows: 3,
      placeholder: 'You are a travel planner.',
    });
    persona.value = project.persona || '';
    const every = h('input', {
      id: 'setting-every',
      type: 'number',
      min: 1,
      max: 1000,
      required: true,
      inputmode: 'numeric',
    });
    every.value = project.distill_every ?? 5;
    const quotes = h('input', {
      id: 'setting-quotes',
      type: 'number',
      min: 1,
      max: 100,
      inputmode: 'numeric',
      placeholder: 'default',
    });
    quotes.value = project.quotes_window ?? '';
    const allowed =
      project.write_tools === null || project.write_tools === undefined
        ? new Set(WRITE_TOOLS.map((t) => t.name))
        : new Set(project.write_tools);
    const tools = WRITE_TOOLS.map((tool) =>
      h(
        'label',
        { class: 'check' },
        h('input', {
          type: 'checkbox',
          name: 'write_tools',
          value: tool.name,
          checked: allowed.has(tool.name),
          disabled: !app.user.is_admin,
        }),
        ` ${tool.label} `,
        h('code', { class: 'small' }, tool.name),
      ),
    );
    const model = modelPicker(project);
    const errorLine = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const form = h(
      'form',
      { class: 'card', id: 'project-form', 'aria-labelledby': 'project-form-heading' },
      h('h2', { id: 'project-form-heading' }, `Project: ${project.name}`),
      h(
        'p',
        { class: 'muted small' },
        `Stored in projects/${project.slug}/project.toml; keys you add by hand are kept.`,
      ),
      field('setting-name', 'Name', name),
      field('setting-style', 'Response style', style, '(how replies should read here)'),
      field('setting-persona', 'Persona', persona, '(extra instructions)'),
      h(
        'div',
        { class: 'two' },
        h('div', {}, field('setting-every', 'Distill every', every, '(messages)')),
        h('div', {}, field('setting-quotes', 'Recent quotes kept', quotes)),
      ),
      h(
        'fieldset',
        { class: 'tools' },
        h('legend', {}, 'Write tools Charlie may use in this project'),
        tools,
        h(
          'p',
          { class: 'hint' },
          app.user.is_admin
            ? 'Reading tools (search, read notes and memory) are always allowed.'
            : 'Reading tools are always allowed. Only an administrator can change these.',
        ),
      ),
      field('setting-model', 'Model', model.select, '(from the model server)'),
      model.note,
      errorLine,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'button-primary' }, 'Save settings'),
      ),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      errorLine.hidden = true;
      const cadence = Number(every.value);
      if (!Number.isInteger(cadence) || cadence < 1 || cadence > 1000) {
        errorLine.hidden = false;
        errorLine.textContent = 'Distill every: a whole number from 1 to 1000.';
        every.focus();
        return;
      }
      const changes = {
        name: name.value.trim(),
        style: style.value.trim(),
        persona: persona.value.trim(),
        distill_every: cadence,
        quotes_window: quotes.value === '' ? null : Number(quotes.value),
      };
      if (app.user.is_admin) {
        changes.write_tools = [...form.querySelectorAll('input[name=write_tools]:checked')].map(
          (i) => i.value,
        );
      }
      try {
        let saved = await patch(`/api/projects/${enc(project.slug)}`, changes);
        if (!model.select.disabled && model.select.value !== (project.model || '')) {
          const chosen = await put(`/api/projects/${enc(project.slug)}/model`, {
            model: model.select.value,
          });
          saved = { ...saved, model: chosen.model };
        }
        app.projectChanged(saved);
        toast('Settings saved.');
      } catch (error) {
        errorLine.hidden = false;
        errorLine.textContent = error.message;
      }
    });
    return form;
  }

  // The model this project's chat uses: one the model server lists (its /v1/models), or
  // the server's default. The list is asked for each time the form is shown.
  function modelPicker(project) {
    const select = h('select', { id: 'setting-model', disabled: true });
    const note = h('p', { class: 'hint', id: 'setting-model-note' }, 'Asking the model server…');
    select.append(h('option', { value: project.model || '' }, project.model || 'Default'));
    get('/api/models')
      .then((listed) => {
        const fallback = listed.default ? `Default (${listed.default})` : 'Default (the first)';
        const names = [...listed.models];
        if (project.model && !names.includes(project.model)) names.push(project.model);
        select.replaceChildren(
          h('option', { value: '' }, fallback),
          ...names.map((name) =>
            h(
              'option',
              { value: name },
              listed.models.includes(name) ? name : `${name} (not on the server now)`,
            ),
          ),
        );
        select.value = project.model || '';
        select.disabled = false;
        note.textContent = `Replies in this project come from this model (${listed.base_url}).`;
      })
      .catch((error) => {
        note.textContent = `The model list could not be loaded: ${error.message}`;
      });
    return { select, note };
  }

  // Deleting a project (administrators): to the trash, after a second, explicit step.
  function deleteProjectCard(project) {
    const confirmBox = h('div', { class: 'confirm-box callout', hidden: true });
    const start = h('button', { type: 'button', class: 'button-danger' }, 'Delete project…');
    start.addEventListener('click', () => {
      const yes = h(
        'button',
        { type: 'button', class: 'button-danger', id: 'delete-project-confirm' },
        `Move ${project.name} to the trash`,
      );
      const no = h('button', { type: 'button', class: 'button-quiet' }, 'Cancel');
      no.addEventListener('click', () => {
        confirmBox.hidden = true;
        start.hidden = false;
      });
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        try {
          await api('DELETE', `/api/projects/${enc(project.slug)}`);
          toast(`${project.name} is in the trash; Settings → Trash brings it back.`);
          await app.projectsChanged('settings', 'private');
        } catch (error) {
          yes.disabled = false;
          toast(error.message, 'error');
        }
      });
      confirmBox.replaceChildren(
        h(
          'p',
          {},
          `${project.name} leaves the project list for everyone: its notes, memory and ` +
            'conversation move to the trash (nothing is destroyed) until someone restores it.',
        ),
        h('div', { class: 'actions' }, yes, no),
      );
      confirmBox.hidden = false;
      start.hidden = true;
      yes.focus();
    });
    return h(
      'section',
      { class: 'card', id: 'delete-project', 'aria-labelledby': 'delete-project-heading' },
      h('h2', { id: 'delete-project-heading' }, 'Delete this project'),
      confirmBox,
      h('div', { class: 'actions' }, start),
    );
  }

  function show(channel) {
    if (app.isPrivate(channel)) {
      box.replaceChildren(
        h(
          'section',
          { class: 'card' },
          h('h2', {}, 'Private channel'),
          h(
            'p',
            {},
            'Your private channel has no project settings. What you say there, and its memory, ' +
              'are kept only in Charlie’s database, readable by you alone; it never writes note files, ' +
              'and Charlie may only record decisions in its memory.',
          ),
          app.projects.length
            ? null
            : h(
                'p',
                { class: 'muted' },
                'There are no shared projects yet: create the first one below.',
              ),
        ),
      );
    } else {
      const project = app.projects.find((p) => p.slug === channel);
      box.replaceChildren(
        project
          ? projectForm(project)
          : h('p', { class: 'callout callout-error' }, `There is no project ${channel}.`),
      );
      if (project && app.user.is_admin) box.append(deleteProjectCard(project));
    }
    const people = household.cards();
    const yours = [voiceCard(), discordCard(), appTokens.card, dataCard(), people.account];
    const here = app.isPrivate(channel) ? 'This channel' : 'This project';
    grouped([
      [here, [...box.children, newForm]],
      ['You', yours],
      ['Everyone', people.household],
      ['This Charlie', [about]],
    ]);
    appTokens.refresh();
    renderHealth();
  }

  // Settings in four groups, each under its heading, with a row of buttons that bring one
  // into view: what applies here, what is yours, the household's, and this Charlie's own.
  function grouped(groups) {
    const nav = h('nav', { class: 'settings-nav', 'aria-label': 'Settings groups' });
    const sections = groups.map(([title, cards], number) => {
      const heading = h(
        'h2',
        { class: 'settings-group-title', id: `settings-group-${number}`, tabindex: -1 },
        title,
      );
      nav.append(
        h(
          'button',
          {
            type: 'button',
            onclick: () => {
              bringIntoView(heading);
              heading.focus({ preventScroll: true });
            },
          },
          title,
        ),
      );
      return h(
        'section',
        { class: 'settings-group', 'aria-labelledby': heading.id },
        heading,
        ...cards,
      );
    });
    box.replaceChildren(nav, ...sections);
    coveredBy(nav);
  }

  // Link Discord: a one-time code the person sends to the bot as `/charlie link CODE`.
  function discordCard() {
    const result = h('p', { class: 'discord-code', 'aria-live': 'polite', hidden: true });
    const button = h('button', { type: 'button', id: 'discord-code-button' }, 'Get a code');
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        const made = await post('/api/me/discord-code');
        const until = new Date(made.expires_at).toLocaleTimeString([], {
          hour: '2-digit',
          minute: '2-digit',
        });
        result.replaceChildren(
          'Send ',
          h('code', { id: 'discord-code' }, `/charlie link ${made.code}`),
          ` to Charlie in Discord before ${until}. The code works once.`,
        );
      } catch (error) {
        result.replaceChildren(error.message);
      } finally {
        result.hidden = false;
        button.disabled = false;
      }
    });
    return h(
      'section',
      { class: 'card', id: 'discord-link' },
      h('h2', {}, 'Link Discord'),
      h(
        'p',
        { class: 'muted small' },
        'Talk to Charlie from Discord as yourself: your DMs with the bot become your private ' +
          'channel. Get a code here, then send it to the bot.',
      ),
      result,
      h('div', { class: 'actions' }, button),
    );
  }

  // Your data: the zip `charlie export --private` writes, for the person signed in. A link with
  // `download` lets the browser save it as it arrives (the session cookie goes with it).
  function dataCard() {
    const link = h('a', { href: '/api/export', download: '', hidden: true });
    const button = h('button', { type: 'button', id: 'export-button' }, 'Export my data');
    button.addEventListener('click', () => {
      link.click();
      toast('Your export is downloading.');
    });
    return h(
      'section',
      { class: 'card', id: 'your-data', 'aria-labelledby': 'your-data-heading' },
      h('h2', { id: 'your-data-heading' }, 'Your data'),
      h(
        'p',
        { class: 'muted small' },
        'Download a zip of every shared project (notes, memory, conversations) and your own ' +
          'private channel, never anyone else’s. ',
        h('code', {}, 'charlie restore'),
        ' brings it back.',
      ),
      link,
      h('div', { class: 'actions' }, button),
    );
  }

  // Tokens for other apps: an MCP client (or a script) acts as this person with a bearer
  // token. Its secret is in the answer that makes it, and shown here that once.
  function createTokens() {
    const mcpUrl = `${window.location.origin}/mcp`;
    const list = h('ul', { class: 'token-list', id: 'token-list', 'aria-live': 'polite' });
    const label = h('input', {
      id: 'token-label',
      maxlength: 80,
      placeholder: 'Claude Desktop',
      autocomplete: 'off',
    });
    const readOnly = h('input', { id: 'token-read-only', type: 'checkbox' });
    const errorLine = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const secretBox = h('div', { class: 'token-secret callout', id: 'token-secret', hidden: true });
    const form = h(
      'form',
      { id: 'token-form', class: 'token-form' },
      h(
        'label',
        { for: 'token-label' },
        'What is it for? ',
        h('span', { class: 'hint' }, '(optional)'),
      ),
      label,
      h('label', { class: 'check' }, readOnly, ' Read-only: the app may read, never change'),
      errorLine,
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Make a token')),
    );
    const card = h(
      'section',
      { class: 'card', id: 'app-tokens', 'aria-labelledby': 'app-tokens-heading' },
      h('h2', { id: 'app-tokens-heading' }, 'Tokens for other apps (MCP)'),
      h(
        'p',
        { class: 'muted small' },
        'Another app (an MCP client such as Claude Desktop, or a script) can use Charlie as ' +
          'you, private channel included, with a token. Give each app its own; revoke one and ' +
          'only that app loses its way in.',
      ),
      h('p', { class: 'small' }, 'MCP address: ', h('code', { id: 'mcp-url' }, mcpUrl)),
      list,
      secretBox,
      form,
    );

    function showSecret(made) {
      const secret = h('code', { class: 'secret', id: 'token-secret-value' }, made.secret);
      const copy = h('button', { type: 'button', id: 'token-copy' }, 'Copy');
      copy.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(made.secret);
          toast('Token copied.');
        } catch {
          window.getSelection().selectAllChildren(secret); // copy by hand from here
          toast('Select and copy the token by hand.', 'error');
        }
      });
      const done = h('button', { type: 'button', class: 'button-quiet' }, 'Done');
      done.addEventListener('click', hideSecret);
      const forWhat = made.token.label ? ` for ${made.token.label}` : '';
      secretBox.replaceChildren(
        h('p', {}, h('strong', {}, `Your new token${forWhat}:`)),
        h('p', { class: 'secret-line' }, secret, copy),
        h(
          'p',
          { class: 'small' },
          'Copy it now: it will not be shown again. The app sends it as ',
          h('code', {}, 'Authorization: Bearer …'),
          ' to ',
          h('code', {}, mcpUrl),
          '.',
        ),
        h('div', { class: 'actions' }, done),
      );
      secretBox.hidden = false;
    }

    function hideSecret() {
      secretBox.replaceChildren();
      secretBox.hidden = true;
    }

    function item(token) {
      const name = h('span', { class: 'token-label' }, token.label || 'Unnamed token');
      const badges = [
        token.read_only ? h('span', { class: 'badge' }, 'read-only') : null,
        token.active ? null : h('span', { class: 'badge badge-error' }, 'revoked'),
      ];
      const used = token.last_used_at ? `last used ${when(token.last_used_at)}` : 'never used';
      const facts = token.active
        ? `Made ${when(token.created_at)} · ${used}`
        : `Made ${when(token.created_at)} · ${used} · revoked ${when(token.revoked_at)}`;
      const row = h(
        'li',
        { dataset: { token: token.id } },
        h('div', {}, name, badges, h('div', { class: 'muted small' }, facts)),
      );
      if (token.active) row.append(revokeButton(token));
      return row;
    }

    // Revoking cannot be undone: the first press asks, the second (within 5 s) revokes.
    function revokeButton(token) {
      const button = h('button', { type: 'button', class: 'button-small' }, 'Revoke');
      let armed = null;
      button.addEventListener('click', async () => {
        if (!armed) {
          button.textContent = 'Revoke for good?';
          armed = setTimeout(() => {
            armed = null;
            button.textContent = 'Revoke';
          }, 5000);
          return;
        }
        clearTimeout(armed);
        button.disabled = true;
        try {
          await api('DELETE', `/api/tokens/${enc(token.id)}`);
          toast(`Revoked ${token.label || 'the token'}; apps using it are refused now.`);
          await refresh();
        } catch (error) {
          button.disabled = false;
          toast(error.message, 'error');
        }
      });
      return button;
    }

    async function refresh() {
      try {
        const found = (await get('/api/tokens')).tokens;
        list.replaceChildren(
          ...(found.length
            ? found.map(item)
            : [h('li', { class: 'muted small' }, 'No tokens yet.')]),
        );
      } catch (error) {
        list.replaceChildren(h('li', { class: 'form-error' }, error.message));
      }
    }

    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      errorLine.hidden = true;
      try {
        const made = await post('/api/tokens', {
          label: label.value.trim(),
          read_only: readOnly.checked,
        });
        label.value = '';
        readOnly.checked = false;
        showSecret(made);
        await refresh();
      } catch (error) {
        errorLine.hidden = false;
        errorLine.textContent = error.message;
      }
    });

    return {
      card,
      refresh() {
        hideSecret(); // coming back to Settings: the secret was shown once already
        return refresh();
      },
    };
  }

  function renderHealth() {
    const data = app.health;
    if (!data) {
      health.replaceChildren(h('dt', {}, 'Status'), h('dd', {}, 'Unknown (not checked yet).'));
      return;
    }
    const llm = data.llm || {};
    const index = data.index || {};
    const rows = [
      ['Version', data.version],
      ['Signed in as', `${app.user.name}${app.user.is_admin ? ' (admin)' : ''}`],
      ['Language model', `${llm.model || 'the server’s first model'} at ${llm.base_url || '?'}`],
      [
        'Model status',
        llm.reachable ? 'reachable' : `unreachable${llm.error ? `: ${llm.error}` : ''}`,
      ],
      [
        'Search index',
        `${index.notes ?? '?'} notes, ${index.chunks ?? '?'} chunks${index.model ? `, ${index.model}` : ''}` +
          (index.state && index.state !== 'ready' ? ` (${index.state})` : ''),
      ],
    ];
    if (index.incomplete || index.error) rows.push(['Index status', index.incomplete || index.error]);
    const problems = index.problems;
    if (Array.isArray(problems) ? problems.length : problems) {
      rows.push([
        'Unreadable notes',
        Array.isArray(problems)
          ? problems.map((p) => (typeof p === 'string' ? p : JSON.stringify(p))).join('; ')
          : String(problems),
      ]);
    }
    health.replaceChildren(
      ...rows.flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, String(value ?? '—'))]),
    );
  }

  // The `charlie doctor` checks, run on request: each one is a small model call.
  function createDoctor() {
    const note = h(
      'p',
      { class: 'muted small', id: 'doctor-status', 'aria-live': 'polite' },
      'Check what the model server can do: each check sends it a small request, and a run ' +
        'takes up to a minute.',
    );
    const rows = h('tbody');
    const table = h(
      'table',
      { class: 'doctor-table', id: 'doctor-table', hidden: true },
      h('caption', {}, 'Model server checks'),
      h(
        'thead',
        {},
        h('tr', {}, ['Check', 'Result', 'Fix'].map((name) => h('th', { scope: 'col' }, name))),
      ),
      rows,
    );
    const button = h('button', { type: 'button', onclick: run }, 'Run checks');

    async function run() {
      button.disabled = true;
      note.textContent = 'Running the checks…';
      try {
        const report = await get('/api/doctor');
        rows.replaceChildren(...report.checks.map(row));
        table.hidden = false;
        note.textContent =
          report.verdict ||
          (report.ok
            ? 'Charlie can chat with this server.'
            : 'Charlie cannot chat with this server until the FAIL lines are fixed.');
      } catch (error) {
        note.textContent = `The checks could not run: ${error.message}`;
      } finally {
        button.disabled = false;
      }
    }

    return {
      panel: h('div', { class: 'doctor' }, note, table, h('div', { class: 'actions' }, button)),
    };
  }

  function row(check) {
    const marks = { ok: 'ok', warn: 'warn', slow: 'SLOW', fail: 'FAIL' };
    const result = check.status in marks ? `${marks[check.status]}: ${check.result}` : check.result;
    return h(
      'tr',
      { dataset: { status: check.status } },
      h('th', { scope: 'row' }, check.check),
      h('td', {}, result),
      h('td', {}, check.fix || ''),
    );
  }

  newForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    newError.hidden = true;
    const name = newName.value.trim();
    if (!name) {
      newError.hidden = false;
      newError.textContent = 'Give the project a name.';
      newName.focus();
      return;
    }
    try {
      const project = await post('/api/projects', { name, style: newStyle.value.trim() });
      newName.value = '';
      newStyle.value = '';
      toast(`Project ${project.name} created.`);
      await app.projectCreated(project);
    } catch (error) {
      newError.hidden = false;
      newError.textContent = error.message;
    }
  });

  return { show, renderHealth };
}
