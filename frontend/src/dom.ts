// DOM building without HTML strings. Strings become text nodes (textContent), never markup:
// kernel, op and run names come from traces, which are untrusted input.

export type Child = Node | string | number | null | undefined | false | Child[];

export interface Attrs {
  class?: string;
  title?: string;
  testid?: string;
  style?: Partial<Record<string, string>>;
  data?: Record<string, string>;
  on?: Partial<Record<string, (ev: Event) => void>>;
  // Plain properties (href, type, value, checked, disabled, colSpan, target, rel, open, ...)
  props?: Record<string, string | number | boolean>;
  attrs?: Record<string, string>;
}

const SAFE_PROPS = new Set([
  'href',
  'target',
  'rel',
  'type',
  'value',
  'checked',
  'disabled',
  'selected',
  'colSpan',
  'rowSpan',
  'open',
  'placeholder',
  'htmlFor',
  'tabIndex',
  'id',
  'name',
  'multiple',
  'min',
  'max',
  'step',
]);

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    if (attrs.class) el.className = attrs.class;
    if (attrs.title !== undefined) el.title = attrs.title;
    if (attrs.testid) el.dataset.testid = attrs.testid;
    if (attrs.data) for (const [k, v] of Object.entries(attrs.data)) el.dataset[k] = v;
    if (attrs.style) for (const [k, v] of Object.entries(attrs.style)) if (v !== undefined) el.style.setProperty(k, v);
    if (attrs.props) {
      for (const [k, v] of Object.entries(attrs.props)) {
        if (!SAFE_PROPS.has(k)) throw new Error(`property ${k} is not allowed`);
        if (k === 'href' && typeof v === 'string' && !/^(https?:|\.|\/|#)/.test(v)) throw new Error('unsafe href');
        (el as unknown as Record<string, unknown>)[k] = v;
      }
    }
    if (attrs.attrs)
      for (const [k, v] of Object.entries(attrs.attrs)) {
        if (/^on/i.test(k)) throw new Error('event handler attributes are not allowed');
        el.setAttribute(k, v);
      }
    if (attrs.on) for (const [k, fn] of Object.entries(attrs.on)) if (fn) el.addEventListener(k, fn);
  }
  append(el, children);
  return el;
}

export function append(parent: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(parent, c);
    else if (c instanceof Node) parent.appendChild(c);
    else parent.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function replace(el: Node, ...children: Child[]): void {
  clear(el);
  append(el, children);
}

// SVG icons built from path data (no markup strings).
export function icon(d: string, size = 14): SVGSVGElement {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', String(size));
  svg.setAttribute('height', String(size));
  svg.setAttribute('aria-hidden', 'true');
  svg.classList.add('icon');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', d);
  path.setAttribute('fill', 'currentColor');
  svg.appendChild(path);
  return svg;
}

export const ICONS = {
  external:
    'M14 3h7v7h-2V6.41l-9.29 9.3-1.42-1.42L17.59 5H14V3zM5 5h6v2H5v12h12v-6h2v6a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2V7a2 2 0 0 1 2-2z',
  warn: 'M1 21h22L12 2 1 21zm12-3h-2v-2h2v2zm0-4h-2v-4h2v4z',
  error: 'M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20zm1 15h-2v-2h2v2zm0-4h-2V7h2v6z',
  info: 'M11 7h2v2h-2V7zm0 4h2v6h-2v-6zm1-9a10 10 0 1 0 0 20 10 10 0 0 0 0-20z',
  refresh:
    'M17.65 6.35A7.96 7.96 0 0 0 12 4a8 8 0 1 0 7.75 10h-2.08A6 6 0 1 1 12 6c1.66 0 3.14.69 4.22 1.78L13 11h7V4l-2.35 2.35z',
  check: 'M9 16.17 4.83 12l-1.42 1.41L9 19 21 7l-1.41-1.41z',
};
