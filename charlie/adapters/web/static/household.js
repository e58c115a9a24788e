// @ts-check
// The household in Settings: your account (password, sessions), the people of the
// household (administrators add, reset and remove them) and the trash.

import { api, enc, get, patch, post } from './api.js';
import { $, h, plural, toast, when } from './dom.js';

// ------------------------------------------------------------ your account, the household, the trash

// One inline confirmation: `text`, then a button that does `action` (and Cancel). Returns the
// box to place; it removes itself when answered.
/**
 * @param {string} text
 * @param {string} label
 * @param {() => any} action
 * @param {{ id?: string }} [options]
 */
function confirmation(text, label, action, { id } = {}) {
  const yes = h('button', { type: 'button', class: 'button-danger', id }, label);
  const no = h('button', { type: 'button', class: 'button-quiet' }, 'Cancel');
  const box = h(
    'div',
    { class: 'confirm-box callout', role: 'group', 'aria-label': label },
    h('p', {}, text),
    h('div', { class: 'actions' }, yes, no),
  );
  no.addEventListener('click', () => box.remove());
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    try {
      await action();
      box.remove();
    } catch (error) {
      yes.disabled = false;
      toast(error.message, 'error');
    }
  });
  setTimeout(() => yes.focus());
  return box;
}

function passwordField(id, label, autocomplete) {
  return [
    h('label', { for: id }, label),
    h('input', { id, type: 'password', autocomplete, minlength: 8, maxlength: 1000 }),
  ];
}

export function createHousehold(app) {
  // ---------------------------------------------------------- your account

  function accountCard() {
    const sessionsLine = h('p', { class: 'small', id: 'account-sessions' }, 'Counting…');
    const others = h(
      'button',
      { type: 'button', id: 'sign-out-others', hidden: true },
      'Sign out everywhere else',
    );
    const signOut = h('button', { type: 'button', class: 'button-quiet' }, 'Sign out');
    signOut.addEventListener('click', () => $('#sign-out').click());
    async function count() {
      try {
        const found = await get('/api/me/sessions');
        sessionsLine.textContent = found.others
          ? `You are also signed in on ${plural(found.others, 'other browser')}.`
          : 'This is the only browser you are signed in on.';
        others.hidden = !found.others;
      } catch (error) {
        sessionsLine.textContent = error.message;
      }
    }
    others.addEventListener('click', async () => {
      try {
        const ended = await post('/api/me/sign-out-others');
        toast(`Signed out ${plural(ended.ended_sessions, 'other session')}.`);
        await count();
      } catch (error) {
        toast(error.message, 'error');
      }
    });

    const errorLine = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const form = h(
      'form',
      { id: 'password-form', class: 'password-form', novalidate: true },
      h('h3', {}, 'Change your password'),
      passwordField('password-current', 'Current password', 'current-password'),
      passwordField('password-new', 'New password', 'new-password'),
      passwordField('password-repeat', 'New password again', 'new-password'),
      h('p', { class: 'hint' }, 'At least 8 characters. Your other sessions end; this one stays.'),
      errorLine,
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Change password')),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      errorLine.hidden = true;
      const [current, fresh, again] = ['current', 'new', 'repeat'].map(
        (which) => form.querySelector(`#password-${which}`).value,
      );
      const problem =
        (!current && 'Type your current password.') ||
        (fresh.length < 8 && 'The new password must be at least 8 characters long.') ||
        (fresh !== again && 'The two new passwords differ.');
      if (problem) {
        errorLine.hidden = false;
        errorLine.textContent = problem;
        return;
      }
      try {
        const changed = await post('/api/me/password', { current, new: fresh });
        form.reset();
        toast(
          `Password changed${changed.ended_sessions ? `; ${plural(changed.ended_sessions, 'other session')} signed out` : ''}.`,
        );
        await count();
      } catch (error) {
        errorLine.hidden = false;
        errorLine.textContent = error.message;
      }
    });
    count();
    return h(
      'section',
      { class: 'card', id: 'your-account', 'aria-labelledby': 'your-account-heading' },
      h('h2', { id: 'your-account-heading' }, 'Your account'),
      h(
        'p',
        {},
        'Signed in as ',
        h('strong', {}, app.user.name),
        app.user.is_admin ? ' (administrator)' : '',
        '.',
      ),
      sessionsLine,
      h('div', { class: 'actions' }, others, signOut),
      form,
    );
  }

  // ---------------------------------------------------------- people (administrators)

  function peopleCard() {
    const list = h('ul', { class: 'people-list', id: 'people-list', 'aria-live': 'polite' });
    const card = h(
      'section',
      { class: 'card', id: 'household', 'aria-labelledby': 'household-heading' },
      h('h2', { id: 'household-heading' }, 'Household'),
      h(
        'p',
        { class: 'muted small' },
        'The people who can use this Charlie. Each has a private channel only they can read; ' +
          'shared projects are everyone’s.',
      ),
      list,
      addPersonForm(),
    );

    async function refresh() {
      try {
        const found = (await get('/api/people')).people;
        list.replaceChildren(...found.map(person));
      } catch (error) {
        list.replaceChildren(h('li', { class: 'form-error' }, error.message));
      }
    }

    function person(who) {
      const badges = [
        who.is_admin ? h('span', { class: 'badge' }, 'administrator') : null,
        who.you ? h('span', { class: 'badge' }, 'you') : null,
        who.can_sign_in ? null : h('span', { class: 'badge badge-error' }, 'no password'),
        who.discord ? h('span', { class: 'badge' }, 'Discord') : null,
      ];
      const facts = `${plural(who.sessions, 'session')}`;
      const row = h(
        'li',
        { dataset: { person: who.name } },
        h(
          'div',
          { class: 'person-head' },
          h('span', { class: 'person-name' }, who.name),
          badges,
          h('span', { class: 'muted small' }, ` · ${facts}`),
        ),
      );
      if (who.you) {
        row.append(
          h(
            'p',
            { class: 'hint' },
            'Change your own password under Your account. Another administrator (or ',
            h('code', {}, 'charlie users'),
            ' on the machine running Charlie) can remove you.',
          ),
        );
        return row;
      }
      const reset = h('button', { type: 'button', class: 'button-small' }, 'Reset password');
      const admin = h(
        'button',
        { type: 'button', class: 'button-small' },
        who.is_admin ? 'Not an administrator' : 'Make administrator',
      );
      const remove = h(
        'button',
        { type: 'button', class: 'button-small button-danger' },
        `Remove ${who.name}…`,
      );
      const actions = h('div', { class: 'actions person-actions' }, reset, admin, remove);
      reset.addEventListener('click', () => {
        row.querySelector('.reset-form')?.remove();
        row.append(resetForm(who));
      });
      admin.addEventListener('click', async () => {
        try {
          await patch(`/api/people/${enc(who.name)}`, { is_admin: !who.is_admin });
          toast(`${who.name} is ${who.is_admin ? 'no longer ' : ''}an administrator.`);
          await refresh();
        } catch (error) {
          toast(error.message, 'error');
        }
      });
      remove.addEventListener('click', async () => {
        row.querySelector('.confirm-box')?.remove();
        try {
          const removal = await get(`/api/people/${enc(who.name)}/removal`);
          row.append(
            confirmation(
              removal.text,
              `Remove ${who.name}`,
              async () => {
                await api('DELETE', `/api/people/${enc(who.name)}`);
                toast(`${who.name} was removed.`);
                await refresh();
              },
              { id: 'remove-person-confirm' },
            ),
          );
        } catch (error) {
          toast(error.message, 'error');
        }
      });
      row.append(actions);
      return row;
    }

    function resetForm(who) {
      const id = `reset-${who.name}`;
      const errorLine = h('p', { class: 'form-error', role: 'alert', hidden: true });
      const form = h(
        'form',
        { class: 'reset-form', novalidate: true },
        passwordField(id, `New password for ${who.name}`, 'new-password'),
        h('p', { class: 'hint' }, 'They are signed out everywhere; tell them the new one.'),
        errorLine,
        h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Set password')),
      );
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        try {
          await post(`/api/people/${enc(who.name)}/password`, {
            password: form.querySelector('input').value,
          });
          toast(`${who.name}'s password was set; they are signed out everywhere.`);
          await refresh();
        } catch (error) {
          errorLine.hidden = false;
          errorLine.textContent = error.message;
        }
      });
      setTimeout(() => form.querySelector('input').focus());
      return form;
    }

    function addPersonForm() {
      const name = h('input', {
        id: 'person-name',
        maxlength: 40,
        autocomplete: 'off',
        autocapitalize: 'none',
        spellcheck: 'false',
        placeholder: 'carol',
      });
      const isAdmin = h('input', { id: 'person-admin', type: 'checkbox' });
      const errorLine = h('p', { class: 'form-error', role: 'alert', hidden: true });
      const form = h(
        'form',
        { id: 'add-person-form', novalidate: true },
        h('h3', {}, 'Add someone'),
        h('label', { for: 'person-name' }, 'Name'),
        name,
        passwordField('person-password', 'Password', 'new-password'),
        h('label', { class: 'check' }, isAdmin, ' Administrator: may add and remove people'),
        errorLine,
        h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Add')),
      );
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        errorLine.hidden = true;
        try {
          const made = await post('/api/people', {
            name: name.value.trim(),
            password: form.querySelector('#person-password').value,
            is_admin: isAdmin.checked,
          });
          form.reset();
          toast(`${made.name} can sign in now.`);
          await refresh();
        } catch (error) {
          errorLine.hidden = false;
          errorLine.textContent = error.message;
        }
      });
      return form;
    }

    refresh();
    return card;
  }

  // ---------------------------------------------------------- the trash

  function trashCard() {
    const list = h('ul', { class: 'trash-list', id: 'trash-list', 'aria-live': 'polite' });

    async function refresh() {
      try {
        const found = await get('/api/trash');
        const items = [...found.projects, ...found.notes].sort((a, b) =>
          b.deleted_at.localeCompare(a.deleted_at),
        );
        list.replaceChildren(
          ...(items.length
            ? items.map(item)
            : [h('li', { class: 'muted small' }, 'The trash is empty.')]),
        );
      } catch (error) {
        list.replaceChildren(h('li', { class: 'form-error' }, error.message));
      }
    }

    function item(thing) {
      const what =
        thing.kind === 'project'
          ? [h('span', { class: 'badge' }, 'project'), ` ${thing.name}`]
          : [h('span', { class: 'badge' }, 'note'), ` ${thing.title} `, h('code', {}, thing.project)];
      const restore = h('button', { type: 'button', class: 'button-small' }, 'Restore');
      const mayRestore = thing.kind === 'note' || app.user.is_admin;
      restore.disabled = !mayRestore;
      if (!mayRestore) restore.title = 'Only an administrator can restore a project.';
      restore.addEventListener('click', async () => {
        restore.disabled = true;
        try {
          const back = await post('/api/trash/restore', { kind: thing.kind, id: thing.id });
          if (back.kind === 'project') {
            toast(`${back.name} is back.`);
            await app.projectsChanged('settings', app.channel);
          } else {
            toast(`${back.title} is back in its project's notes.`);
          }
          await refresh();
        } catch (error) {
          restore.disabled = false;
          toast(error.message, 'error');
        }
      });
      return h(
        'li',
        { dataset: { trash: thing.id } },
        h('div', {}, what, h('div', { class: 'muted small' }, `deleted ${when(thing.deleted_at)}`)),
        restore,
      );
    }

    refresh();
    return h(
      'section',
      { class: 'card', id: 'trash', 'aria-labelledby': 'trash-heading' },
      h('h2', { id: 'trash-heading' }, 'Trash'),
      h(
        'p',
        { class: 'muted small' },
        'Deleted projects and notes wait here, whole, until someone restores them. ',
        h('code', {}, 'charlie trash'),
        ' lists them too.',
      ),
      list,
    );
  }

  return {
    cards() {
      return {
        account: accountCard(),
        household: [app.user.is_admin ? peopleCard() : null, trashCard()].filter(Boolean),
      };
    },
  };
}
