// Which report field a rendered figure is: ``data-field`` on the element whose text writes it, a
// path of keys and indices into the view's body (``summary.mfu``, ``top_kernels.3.total_us``).
// A path that starts with '/' is from the body the view was drawn from (/report's run report,
// /compare's body); any other is relative to the ``data-root`` of the elements around it, joined
// outermost first. tests/e2e/test_every_number.py maps each number on a view to its field with
// them; the tab itself never reads them.
import { h } from './dom';

/** ``data`` of an element whose text is the figure at ``path``. */
export function field(path: string): { field: string } {
  return { field: path };
}

/** ``data`` of an element whose fields' paths are relative to ``path``. */
export function root(path: string): { root: string } {
  return { root: path };
}

/** A figure's text in a span naming its field. */
export function fv(path: string, text: string): HTMLElement {
  return h('span', { data: { field: path } }, text);
}
