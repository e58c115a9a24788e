// @ts-check
// Small line icons for icon buttons (the chats list, the message toolbar), drawn as inline
// SVG built node by node: no HTML string is parsed and nothing is fetched. An icon is
// decoration only (aria-hidden); the button it sits in carries the words (aria-label).

const SVG = 'http://www.w3.org/2000/svg';

// Each icon: the shapes of a 24×24 drawing, stroked with the text colour.
const SHAPES = {
  chats: [['path', { d: 'M4 6h16M4 12h16M4 18h10' }]],
  plus: [['path', { d: 'M12 5v14M5 12h14' }]],
  more: [
    ['circle', { cx: 5, cy: 12, r: 1.2 }],
    ['circle', { cx: 12, cy: 12, r: 1.2 }],
    ['circle', { cx: 19, cy: 12, r: 1.2 }],
  ],
  copy: [
    ['rect', { x: 9, y: 9, width: 11, height: 11, rx: 2 }],
    ['path', { d: 'M15 9V6a2 2 0 0 0-2-2H6a2 2 0 0 0-2 2v7a2 2 0 0 0 2 2h3' }],
  ],
  check: [['path', { d: 'M5 12.5l4.5 4.5L19 7' }]],
  again: [
    ['path', { d: 'M19.5 12a7.5 7.5 0 1 1-2.2-5.3' }],
    ['path', { d: 'M19.5 4v4.5H15' }],
  ],
  edit: [
    ['path', { d: 'M4 20h4L18.5 9.5a2.1 2.1 0 0 0-4-4L4 16z' }],
    ['path', { d: 'M13.5 6.5l4 4' }],
  ],
  previous: [['path', { d: 'M14.5 6l-6 6 6 6' }]],
  next: [['path', { d: 'M9.5 6l6 6-6 6' }]],
  close: [['path', { d: 'M6 6l12 12M18 6L6 18' }]],
  forget: [
    ['path', { d: 'M5 7h14M10 7V5h4v2M7 7l1 12h8l1-12' }],
    ['path', { d: 'M10.5 11l3 4M13.5 11l-3 4' }],
  ],
};

/** The icon `name` as an <svg> element (an unknown name is a mistake in the caller). */
export function icon(name) {
  const shapes = SHAPES[name];
  if (!shapes) throw new Error(`There is no icon named ${name}.`);
  const svg = document.createElementNS(SVG, 'svg');
  const attrs = {
    viewBox: '0 0 24 24',
    width: 18,
    height: 18,
    fill: 'none',
    stroke: 'currentColor',
    'stroke-width': 1.8,
    'stroke-linecap': 'round',
    'stroke-linejoin': 'round',
    'aria-hidden': 'true',
    focusable: 'false',
    class: `icon icon-${name}`,
  };
  for (const [key, value] of Object.entries(attrs)) svg.setAttribute(key, String(value));
  for (const [tag, shape] of shapes) {
    const part = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(shape)) part.setAttribute(key, String(value));
    if (tag === 'circle') part.setAttribute('fill', 'currentColor');
    svg.append(part);
  }
  return svg;
}
