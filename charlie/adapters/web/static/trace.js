// @ts-check
// The tool trace of an answer: what Charlie looked up, what it found, and any guard that
// stepped in. One line per step, each expandable to the full detail. An answer that used
// no tool has no trace to show: its block stays hidden (see `usedTools`).
//
// Steps arrive as the JSON of charlie/trace.py (`to_json`): an object whose `type` names
// the kind of step, with every field of that kind present. Everything shown comes from
// those fields; a kind or guard this file does not know is a console error, not a guess.

import { h, plural } from './dom.js';

const GUARDS = {
  max_iterations: 'round limit reached',
  ignored_calls: 'extra tool calls ignored',
  bad_arguments: 'arguments were not valid JSON',
  duplicate_call: 'repeated call refused',
  unknown_tool: 'no such tool loaded',
  write_not_allowed: 'write not allowed in this project',
  write_refused: 'write refused',
  timeout: 'timed out',
  unreadable_call: 'a tool call Charlie could not read',
  not_an_answer: 'not an answer: asked again',
};

const MODES = {
  native: 'native tool calls',
  text: 'tool calls written as text',
  constrained: 'constrained steps',
};

function guardText(guard) {
  if (!(guard in GUARDS)) console.error(`Unknown trace guard ${JSON.stringify(guard)}`);
  return GUARDS[guard] || guard;
}

function shortValue(value) {
  const text = JSON.stringify(value ?? null);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

function callText(step) {
  const args = step.arguments;
  const inner =
    typeof args === 'string' ? shortValue(args) : Object.values(args).map(shortValue).join(', ');
  return `${step.name}(${inner})`;
}

function badge(text, kind) {
  return h('span', { class: `badge badge-${kind}` }, text);
}

function stepLine(step) {
  switch (step.type) {
    case 'suggested':
      return step.categories.length
        ? [
            h('span', { class: 'step-label' }, 'hint'),
            ` tools pre-loaded: ${step.categories.join(', ')}`,
          ]
        : [h('span', { class: 'step-label' }, 'hint'), ' no tools pre-loaded'];
    case 'load':
      return [
        h('span', { class: 'step-label' }, 'load'),
        ` ${step.category}`,
        step.ok ? ` → ${step.tools.join(', ') || 'loaded'}` : badge('unknown category', 'error'),
      ];
    case 'mode':
      if (!(step.mode in MODES)) console.error(`Unknown tool mode ${JSON.stringify(step.mode)}`);
      return [h('span', { class: 'step-label' }, 'mode'), ` ${MODES[step.mode] || step.mode}`];
    case 'tool_call':
      return [
        step.by === 'charlie'
          ? h('span', { class: 'step-label' },
              step.count == null ? 'Charlie worked out' : 'Charlie looked up')
          : null,
        step.by === 'charlie' ? ' ' : null,
        h('code', { class: 'step-call' }, callText(step)),
        ' → ',
        h('span', { class: 'step-summary' }, step.summary || (step.ok ? 'done' : 'failed')),
        step.writes ? badge('writes', 'write') : null,
        step.guard ? badge(guardText(step.guard), 'guard') : null,
      ];
    case 'guard':
      return [badge('guard', 'guard'), ` ${guardText(step.guard)}: ${step.detail}`];
    default:
      console.error(`Unknown trace step type ${JSON.stringify(step.type)}`, step);
      return [badge(`unknown step: ${step.type}`, 'error')];
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

function foundList(hits) {
  return h(
    'ol',
    { class: 'found' },
    hits.map((hit) =>
      h(
        'li',
        { title: `${hit.key}: ${hit.snippet}` },
        h('span', {}, hit.title),
        h('span', { class: 'score' }, hit.score.toFixed(2)),
      ),
    ),
  );
}

function stepDetail(step) {
  const parts = [];
  if (step.type === 'tool_call') {
    const searched = typeof step.arguments === 'object' ? step.arguments.query : null;
    if (searched) parts.push(h('p', {}, 'Searched for ', h('q', {}, searched)));
    if (step.hits && step.hits.length) {
      parts.push(h('p', {}, `Found ${plural(step.hits.length, 'note')}:`), foundList(step.hits));
    }
    parts.push(
      facts([
        ['tool', step.name],
        ['asked by', step.by === 'charlie' ? 'Charlie (its own look-up)' : 'the model'],
        ['result', step.summary],
        ['found', step.count],
        ['status', step.ok ? 'ok' : 'failed'],
        ['guard', step.guard ? `${step.guard} — ${guardText(step.guard)}` : null],
        ['writes files', step.writes ? 'yes' : null],
        ['time', `${Math.round(step.ms)} ms`],
      ]),
    );
  }
  if (step.type === 'mode') parts.push(h('p', {}, step.reason));
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

/**
 * Whether a trace has something to show: a tool loaded or called, or a guard. The hint of
 * which tools were pre-loaded, and the tool mode, come with every answer, so on their own
 * they are not shown.
 */
export function usedTools(steps) {
  return steps.some((step) => step.type !== 'suggested' && step.type !== 'mode');
}

function headline(steps) {
  const calls = steps.filter((s) => s.type === 'tool_call');
  const guards = steps.filter((s) => s.guard || s.type === 'guard');
  let used = 'no tools used';
  if (calls.length) used = plural(calls.length, 'tool call');
  else if (steps.some((s) => s.type === 'load')) used = 'tools loaded, none called';
  const parts = [used];
  const names = [...new Set(calls.map((s) => s.name))];
  if (names.length) parts.push(names.join(', '));
  if (guards.length) parts.push(plural(guards.length, 'guard'));
  return `Trace · ${parts.join(' · ')}`;
}

/**
 * A trace block; returns {element, add(step)} so steps can arrive while streaming. The
 * element is hidden until a step shows that a tool was used (`usedTools`).
 */
export function traceBlock(steps = [], { open = false } = {}) {
  const list = h('ol', { class: 'trace-steps' });
  const title = h('span', { class: 'trace-title' });
  const element = h('details', { class: 'trace', open }, h('summary', {}, title), list);
  const all = [];
  const update = () => {
    title.textContent = headline(all);
    element.hidden = !usedTools(all);
    element.classList.toggle(
      'trace-has-guard',
      all.some((s) => s.guard || s.type === 'guard'),
    );
  };
  const add = (step) => {
    all.push(step);
    list.append(traceStep(step));
    update();
  };
  steps.forEach(add);
  update();
  return { element, add, steps: all };
}
