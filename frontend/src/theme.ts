// Light or dark, as TensorBoard around the tab shows it, else as the OS asks.
//
// TensorBoard 2.21 gives plugin iframes no theme message (its plugin API posts runs and data
// reloads only). It marks its own page instead: its dark-mode-supporter toggles the class
// `dark-mode` on document.body from the header's toggle (Browser default, Light, Dark), and in
// Browser default reads prefers-color-scheme once, when it loads. The tab's iframe is of the
// same origin (data/plugin_entry.html), so it reads that class and watches it. An OS change
// while the page is open does not reach TensorBoard's class: the tab follows it itself unless
// the user picked Light or Dark in TensorBoard (kept in its `_tb_global_settings.theme`). A saved
// offline report, or the tab outside TensorBoard, follows the OS alone.
import { type Theme, useTheme } from './palette';

const TB_DARK_CLASS = 'dark-mode';
const TB_SETTINGS = '_tb_global_settings';

/** TensorBoard's page around the tab, when there is one we may read. */
function tensorBoardBody(): HTMLElement | null {
  try {
    const p = window.parent;
    if (p === window) return null;
    // TensorBoard's Angular app; another page that frames the tab has no say in its theme
    return p.document.querySelector('tb-webapp') ? p.document.body : null;
  } catch {
    return null; // another origin
  }
}

/** Light or Dark picked in TensorBoard's toggle, or null for Browser default (or unknown). */
function tensorBoardPick(): Theme | null {
  try {
    const theme = JSON.parse(window.parent.localStorage.getItem(TB_SETTINGS) ?? '{}')?.theme;
    return theme === 'dark' || theme === 'light' ? theme : null;
  } catch {
    return null;
  }
}

const osDark = typeof window.matchMedia === 'function' ? window.matchMedia('(prefers-color-scheme: dark)') : null;

function osTheme(): Theme {
  return osDark?.matches ? 'dark' : 'light';
}

let current: Theme = 'light';

/** The theme shown now. */
export function theme(): Theme {
  return current;
}

function apply(t: Theme, changed: (t: Theme) => void): void {
  document.documentElement.dataset.theme = t;
  useTheme(t);
  if (t === current) return;
  current = t;
  changed(t);
}

/** Shows the theme of the page around the tab now, and again whenever it or the OS changes;
 * ``changed`` redraws what paints its own colours (the charts). */
export function followTheme(changed: (t: Theme) => void): void {
  const body = tensorBoardBody();
  const fromTensorBoard = (): Theme => (body?.classList.contains(TB_DARK_CLASS) ? 'dark' : 'light');
  current = body ? fromTensorBoard() : osTheme();
  document.documentElement.dataset.theme = current;
  useTheme(current);
  if (body)
    new MutationObserver(() => apply(fromTensorBoard(), changed)).observe(body, {
      attributes: true,
      attributeFilter: ['class'],
    });
  osDark?.addEventListener('change', () => {
    if (body && tensorBoardPick() !== null) return; // the user's pick in TensorBoard stands
    apply(osTheme(), changed);
  });
}
