// The tool trace of an answer: what Charlie looked up, what it found, and any guard that
// stepped in. One line per step, each expandable to the full detail.

import { h, plural } from './dom.js';

const GUARDS = {
  max_iterations: 'round limit reached',
  ignored_calls: 'extra tool calls ignored',
  bad_arguments: 'arguments were not valid JSON',
  duplicate_call: 'repeated call refused',
  unknown_tool: 'no such tool loaded',
  write_not_allowed: 'write not allowed in this project',
  timeout: 'timed out',
};

function shortValue(value) {
  const text = typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value ?? null);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

function callText(step) {
  const args = step.arguments;
  let inner = '';
  if (typeof args === 'string') inner = shortValue(args);
  else if (args && typeof args === 'object') inner = Object.values(args).map(shortValue).join(', ');
  return `${step.name}(${inner})`;
}

/** "3 notes: JWT refresh tokens 0.82, Session cookies 0.41" → found notes with scores. */
function foundNotes(summary) {
  const match = /^(\d+) notes?: (.+)$/.exec(summary || '');
  if (!match) return null;
  const found = match[2].split(', ').map((part) => {
    const scored = /^(.*) (\d+(?:\.\d+)?)$/.exec(part);
    return scored ? { title: scored[1], score: Number(scored[2]) } : { title: part, score: null };
  });
  return found.length === Number(match[1]) ? found : null;
}

function badge(text, kind) {
  return h('span', { class: `badge badge-${kind}` }, text);
}

function stepLine(step) {
  switch (step.type) {
    case 'suggested':
      return step.categories && step.categories.length
        ? [
            h('span', { class: 'step-label' }, 'hint'),
            ` tools pre-loaded: ${step.categories.join(', ')}`,
          ]
        : [h('span', { class: 'step-label' }, 'hint'), ' no tools pre-loaded'];
    case 'load':
      return [
        h('span', { class: 'step-label' }, 'load'),
        ` ${step.category}`,
        step.ok === false ? badge('unknown category', 'error') : ` → ${step.tools || 'loaded'}`,
      ];
    case 'tool_call':
      return [
        h('code', { class: 'step-call' }, callText(step)),
        ' → ',
        h('span', { class: 'step-summary' }, step.summary || (step.ok ? 'done' : 'failed')),
        step.writes ? badge('writes', 'write') : null,
        step.guard ? badge(GUARDS[step.guard] || step.guard, 'guard') : null,
      ];
    case 'guard':
      return [
        badge('guard', 'guard'),
        ` ${GUARDS[step.guard] || step.guard}: ${step.detail || ''}`,
      ];
    default:
      return [h('span', { class: 'step-label' }, step.type || 'step')];
  }
}

function facts(pairs) {
  const list = h('dl', { class: 'facts small' });
  for (const [term, value] of pairs) {
    if (value === undefined || value === null || value === '') continue;
    list.append(h('dt', {}, term), h('dd', {}, value));
  }
  return list;
}

function stepDetail(step) {
  const parts = [];
  if (step.type === 'tool_call') {
    const found = step.name === 'search_notes' ? foundNotes(step.summary) : null;
    const searched =
      step.arguments && typeof step.arguments === 'object' ? step.arguments.query : null;
    if (searched) parts.push(h('p', {}, 'Searched for ', h('q', {}, searched)));
    if (found) {
      parts.push(
        h('p', {}, `Found ${plural(found.length, 'note')}:`),
        h(
          'ol',
          { class: 'found' },
          found.map((note) =>
            h(
              'li',
              {},
              h('span', {}, note.title),
              note.score === null ? null : h('span', { class: 'score' }, note.score.toFixed(2)),
            ),
          ),
        ),
      );
    }
    parts.push(
      facts([
        ['tool', step.name],
        ['result', step.summary],
        ['status', step.ok ? 'ok' : 'failed'],
        ['guard', step.guard ? `${step.guard} — ${GUARDS[step.guard] || ''}` : null],
        ['writes files', step.writes ? 'yes' : null],
        ['time', typeof step.ms === 'number' ? `${Math.round(step.ms)} ms` : null],
      ]),
    );
  }
  parts.push(
    h(
      'details',
      { class: 'step-raw' },
      h('summary', { class: 'small muted' }, 'Raw step'),
      h('pre', { class: 'step-json' }, JSON.stringify(step, null, 2)),
    ),
  );
  return parts;
}

function stepClass(step) {
  if (step.guard || step.type === 'guard') return 'step step-guard';
  if (step.ok === false) return 'step step-error';
  return 'step';
}

export function traceStep(step) {
  return h(
    'li',
    { class: stepClass(step) },
    h(
      'details',
      {},
      h('summary', {}, stepLine(step)),
      h('div', { class: 'step-detail' }, stepDetail(step)),
    ),
  );
}

function headline(steps) {
  const calls = steps.filter((s) => s.type === 'tool_call');
  const guards = steps.filter((s) => s.guard || s.type === 'guard');
  const parts = [calls.length ? `${plural(calls.length, 'tool call')}` : 'no tools used'];
  const names = [...new Set(calls.map((s) => s.name))];
  if (names.length) parts.push(names.join(', '));
  if (guards.length) parts.push(plural(guards.length, 'guard'));
  return `Trace · ${parts.join(' · ')}`;
}

/** A trace block; returns {element, add(step)} so steps can arrive while streaming. */
export function traceBlock(steps = [], { open = false } = {}) {
  const list = h('ol', { class: 'trace-steps' });
  const title = h('span', { class: 'trace-title' });
  const element = h('details', { class: 'trace', open }, h('summary', {}, title), list);
  const all = [];
  const add = (step) => {
    all.push(step);
    list.append(traceStep(step));
    title.textContent = headline(all);
    element.classList.toggle(
      'trace-has-guard',
      all.some((s) => s.guard || s.type === 'guard'),
    );
  };
  steps.forEach(add);
  title.textContent = headline(all);
  return { element, add, steps: all };
}
