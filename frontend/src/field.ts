// Which report field a rendered figure is, for tests/e2e/test_numbers_are_fields.py (the tab itself
// never reads these attributes). A path is keys and indices into the body the view was drawn from
// (/report's run report, /compare's body): ``summary.mfu``, ``top_kernels.3.total_us``.
// - ``data-field``: the element's text writes the figure at that path (its unit's text, format.ts).
// - ``data-scope``: every figure in the element's text (outside a data-field) is one of the fields
//   under that path (or under one of its paths, space-separated): a table's row, a finding, a block.
// - ``data-root``: the paths inside are relative to it.
// A path is relative to the data-root and data-scope around it, joined outermost first, unless it
// starts with '/': then it is from the body.
import { h } from './dom';

/** ``data`` of an element whose text is the figure at ``path``. */
export function field(path: string): { field: string } {
  return { field: path };
}

/** ``data`` of an element whose figures are all fields under ``path``. */
export function scope(path: string): { scope: string } {
  return { scope: path };
}

/** ``data`` of an element whose paths inside are relative to ``path``. */
export function root(path: string): { root: string } {
  return { root: path };
}

/** A figure's text in a span naming its field. */
export function fv(path: string, text: string): HTMLElement {
  return h('span', { data: { field: path } }, text);
}

/** ``el`` with its paths inside relative to ``path`` (``root``). */
export function rooted<E extends HTMLElement>(el: E, path: string): E {
  el.dataset.root = path;
  return el;
}

/** ``el`` (if any) with its figures all fields under ``path`` (``scope``). */
export function withScope<E extends HTMLElement>(el: E | null, path: string): E | null {
  if (el) el.dataset.scope = path;
  return el;
}
