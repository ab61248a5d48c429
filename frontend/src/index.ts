// The MFU tab: TensorBoard loads this ES module into the plugin iframe and calls render().
// This entry point wires the header's controls, the main area's views and the polling of
// /runs to the one state (appstate.ts). A saved offline page (offline.ts) inlines this same
// bundle and runs the same code, its route calls answered from the bodies it holds.
import { answerFrom, fetchRuns, HttpError } from './api';
import {
  applyHash,
  awaitRun,
  hashSnapshot,
  pickDefaults,
  restoreView,
  saveHash,
  state,
  store,
  useSuggestion,
  type View,
} from './appstate';
import { disposeCharts } from './charts';
import { type Child, clear, h, ICONS, icon, replace } from './dom';
import { onHashChange, readHash } from './hashstate';
import { Header } from './header';
import { offlinePayload, savedAt } from './offline';
import { cssVariables } from './palette';
import { errorPanel, loadingNow } from './status';
import css from './style.css';
import { followTheme } from './theme';
import { Uploader } from './upload';
import { compareContent, mainSig, overviewContent } from './views';

const POLL_LOADING_MS = 1000;
const POLL_IDLE_MS = 15000;

const uploader = new Uploader((run) => {
  // show the new run once a scan lists it
  awaitRun(run);
  state.view = 'overview';
  void tick(true);
});

// The bodies a saved offline page holds, or null in the tab.
const saved = offlinePayload();
const header = new Header(
  { view: setView, run: setRun, worker: setWorker },
  saved ? { tagline: 'saved report', views: ['overview'], external: false } : {},
);
const main = h('main', { testid: 'main' });

function setView(v: View): void {
  state.view = v;
  useSuggestion();
  store('view', v);
  saveHash(true);
  header.render();
  void renderMain(true);
}

function setRun(name: string): void {
  state.run = name;
  store('run', name);
  saveHash(true);
  header.render();
  void renderMain(true);
}

function setWorker(idx: number): void {
  if (!state.run) return;
  state.worker.set(state.run, idx);
  state.shownWorker.delete(state.run); // the user's pick, found by index this once
  saveHash(true);
  void renderMain(true);
}

// ---- main area --------------------------------------------------------------

let renderSeq = 0;

/** Draws the main area again if what it shows changed (or ``force``); the page keeps its scroll
 * unless the user moved to another view, run or worker (``force`` without ``keepScroll``). */
async function renderMain(force = false, keepScroll = !force): Promise<void> {
  const seq = ++renderSeq;
  const wanted = mainSig();
  if (!force && wanted === state.shownSig) return;

  let content: Child;
  try {
    content =
      state.view === 'overview'
        ? await overviewContent(() => uploader.emptyHint())
        : await compareContent(state.view, () => void renderMain(true));
  } catch (err) {
    content = errorPanel('Could not load the report', [err instanceof Error ? err.message : String(err)]);
  }
  if (seq !== renderSeq) return; // a newer render started while this one waited
  state.shownSig = wanted;
  disposeCharts(main);
  const scroll = document.scrollingElement?.scrollTop ?? 0;
  replace(main, content);
  if (keepScroll && document.scrollingElement) document.scrollingElement.scrollTop = scroll;
  header.render();
  saveHash(false); // defaults filled in (the run, its worker) complete the link in place
}

// ---- polling ----------------------------------------------------------------

let timer: number | undefined;

async function tick(refresh = false): Promise<void> {
  window.clearTimeout(timer);
  try {
    state.runs = await fetchRuns(refresh);
    state.runsError = null;
  } catch (err) {
    state.runsError = err instanceof HttpError ? err.message : String(err);
  }
  uploader.update(state.runs);
  pickDefaults();
  header.render();
  await renderMain(false);
  if (saved) return; // a saved page's runs never change
  const busy = !state.runs?.scanned || state.runs.scanning || (state.runs?.runs ?? []).some(loadingNow);
  timer = window.setTimeout(() => void tick(), busy ? POLL_LOADING_MS : POLL_IDLE_MS);
}

// ---- entry ------------------------------------------------------------------

export function render(): void {
  // the charts paint their own colours: a theme change draws the main area again, in place
  followTheme(() => void renderMain(true, true));
  const style = document.createElement('style');
  style.textContent = cssVariables() + css;
  document.head.appendChild(style);
  if (!saved) restoreView();
  applyHash(readHash()); // a link's view wins over the last one used here
  if (saved) state.view = 'overview'; // a saved page has its Overview only
  onHashChange((hs) => {
    const now = hashSnapshot();
    if (JSON.stringify({ ...now, ...hs }) === JSON.stringify(now)) return; // ours, or TensorBoard's own keys
    applyHash(hs);
    header.render();
    void renderMain(true);
  });

  const refresh = h(
    'button',
    {
      class: 'iconbtn',
      title: 'Look for new runs and spans now',
      testid: 'refresh',
      on: { click: () => void tick(true) },
    },
    icon(ICONS.refresh, 16),
  );
  const tools = saved ? [savedAt(saved)] : [uploader.button, refresh];
  const app = h(
    'div',
    { class: `app${saved ? ' offline' : ''}` },
    header.topbar(...tools),
    header.loading,
    saved ? null : uploader.panel,
    main,
  );
  clear(document.body);
  document.body.appendChild(app);
  if (!saved) uploader.attach(app);
  header.render();
  void tick();
}

// The downloaded offline report (tensorboard/offline.py) inlines this bundle: draw it there,
// opening on the run and worker report it was saved on.
if (saved) {
  answerFrom(saved);
  state.view = 'overview';
  state.run = saved.run;
  state.worker.set(saved.run, saved.worker);
  render();
}
