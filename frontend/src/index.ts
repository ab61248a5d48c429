// The MFU tab: TensorBoard loads this ES module into the plugin iframe and calls render().
import { fetchCompare, fetchReport, fetchRuns, HttpError, tensorboardUrl } from './api';
import { disposeCharts } from './charts';
import { strategyText } from './communication';
import { type CompareColumn, renderCompare } from './compare';
import { type Child, clear, h, ICONS, icon, replace } from './dom';
import { type HashState, hashWorker, onHashChange, readHash, workerKey, writeHash } from './hashstate';
import { downloadLinks, offlinePayload, renderOffline } from './offline';
import { renderWorker } from './overview';
import { cssVariables } from './palette';
import { ranksCard } from './ranks';
import {
  emptyPanel,
  errorPanel,
  loadingNow,
  loadingRows,
  partialBanner,
  progressPanel,
  stateLabel,
  statusLine,
} from './status';
import { strategiesCard } from './strategies';
import css from './style.css';
import type { PendingFile, RunReport, RunStatus, RunsBody, WorkerReport } from './types';
import { Uploader } from './upload';
import { usable, workerLabel } from './workers';

type View = 'overview' | 'compare' | 'strategies';

const VIEW_LABEL: Record<View, string> = { overview: 'Overview', compare: 'Compare', strategies: 'Strategies' };
const POLL_LOADING_MS = 1000;
const POLL_IDLE_MS = 15000;
const STORE = 'tb-mfu:';

interface State {
  runs: RunsBody | null;
  runsError: string | null;
  view: View;
  run: string | null;
  worker: Map<string, number>; // selected worker report per run
  // The report shown per run, by identity: a rank that arrives later moves the indices.
  shownWorker: Map<string, string>;
  compare: string[];
  // Per run, the last report and the files it still waited for (a 202's pending list).
  reports: Map<string, { sig: string; report: RunReport; pending: PendingFile[] }>;
  shownSig: string; // what the main area shows, to re-render only on change
}

const state: State = {
  runs: null,
  runsError: null,
  view: 'overview',
  run: null,
  worker: new Map(),
  shownWorker: new Map(),
  compare: [],
  reports: new Map(),
  shownSig: '',
};

// What the URL hash asked for and the runs or the report do not show yet (hashstate.ts);
// ``under``: the run, or else the first run below it (an uploaded archive holds several).
let pending: HashState & { under?: boolean } = {};
const uploader = new Uploader((run) => {
  // show the new run once a scan lists it
  pending = { run, under: true };
  state.view = 'overview';
  void tick(true);
});

const el = {
  runSelect: h('select', { testid: 'run-select', title: 'Run' }),
  workerSelect: h('select', { testid: 'worker-select', title: 'Worker · device · span' }),
  tabs: h('nav', { class: 'tabs' }),
  status: h('span', { class: 'status', testid: 'load-status' }),
  loading: h('div', { class: 'loading-strip', testid: 'loading' }),
  main: h('main', { testid: 'main' }),
  pytorch: h(
    'a',
    { class: 'ext', testid: 'pytorch-link', props: { target: '_top', rel: 'noopener' } },
    'PyTorch Profiler',
    icon(ICONS.external, 12),
  ),
  pickers: h('div', { class: 'pickers' }),
};

function store(key: string, value: string | null): void {
  try {
    if (value === null) localStorage.removeItem(STORE + key);
    else localStorage.setItem(STORE + key, value);
  } catch {
    /* storage may be disabled */
  }
}

function stored(key: string): string | null {
  try {
    return localStorage.getItem(STORE + key);
  } catch {
    return null;
  }
}

function runStatus(name: string | null): RunStatus | undefined {
  return state.runs?.runs.find((r) => r.name === name);
}

function sig(r: RunStatus | undefined): string {
  if (!r) return 'none';
  return `${r.state}|${r.size}|${r.workers.map((w) => w.spans.map((s) => `${s.span}:${s.mtime}:${s.state}`).join(',')).join(';')}`;
}

// ---- header -----------------------------------------------------------------

function renderHeader(): void {
  const runs = state.runs?.runs ?? [];
  // tabs
  replace(
    el.tabs,
    (['overview', 'compare', 'strategies'] as View[]).map((v) =>
      h(
        'button',
        {
          class: `tab ${state.view === v ? 'active' : ''}`,
          testid: `tab-${v}`,
          attrs: { role: 'tab', 'aria-selected': String(state.view === v) },
          on: { click: () => setView(v) },
        },
        VIEW_LABEL[v],
      ),
    ),
  );
  // run select
  replace(
    el.runSelect,
    runs.map((r) => {
      const label = stateLabel(r);
      return h(
        'option',
        { props: { value: r.name, selected: r.name === state.run } },
        label ? `${r.name} — ${label}` : r.name,
      );
    }),
  );
  el.runSelect.disabled = !runs.length;
  // worker select: filled from the report when there is one
  const report = state.run ? state.reports.get(state.run)?.report : undefined;
  const cur = state.run ? (state.worker.get(state.run) ?? 0) : 0;
  const options = report
    ? report.workers.map((w, i) =>
        h('option', { props: { value: String(i), selected: i === cur } }, workerLabel(w, report)),
      )
    : [];
  replace(el.workerSelect, options);
  el.workerSelect.disabled = options.length < 2;

  el.pickers.classList.toggle('hidden', state.view !== 'overview');
  el.pytorch.href = tensorboardUrl('pytorch_profiler');
  el.pytorch.title = state.run
    ? `Open the stock PyTorch Profiler tab (choose run "${state.run}" there): traces, operators, memory.`
    : 'Open the stock PyTorch Profiler tab';

  replace(el.status, statusLine(state.runs, state.runsError));
  const items = loadingRows(state.runs);
  replace(el.loading, items);
  el.loading.classList.toggle('hidden', !items.length);
}

function setView(v: View): void {
  state.view = v;
  if (v !== 'overview' && !stored('compare-touched') && state.run) {
    // Until the user picks, compare the run on screen with the next one.
    const names = (state.runs?.runs ?? []).map((r) => r.name);
    const i = names.indexOf(state.run);
    const next = names[(i + 1) % names.length];
    if (i >= 0 && next && next !== state.run) state.compare = [state.run, next];
  }
  store('view', v);
  saveHash(true);
  renderHeader();
  void renderMain(true);
}

function setRun(name: string): void {
  state.run = name;
  store('run', name);
  saveHash(true);
  renderHeader();
  void renderMain(true);
}

// ---- the URL hash -------------------------------------------------------------

function hashSnapshot(): HashState {
  const report = state.run ? state.reports.get(state.run)?.report : undefined;
  const idx = state.run ? state.worker.get(state.run) : undefined;
  return {
    view: state.view,
    run: state.run ?? undefined,
    ...(state.view === 'overview' && report && idx !== undefined ? workerKey(report.workers[idx]) : {}),
    compare: state.view !== 'overview' && state.compare.length ? state.compare : undefined,
  };
}

/** The view into the hash; not while a link's own state still waits to be shown. */
function saveHash(push: boolean): void {
  if (pending.run === undefined && pending.compare === undefined && pending.worker === undefined)
    writeHash(hashSnapshot(), push);
}

/** A link's state, or back/forward's: shown now where it can be, the rest when runs and reports come. */
function applyHash(hs: HashState): void {
  if (hs.view) state.view = hs.view;
  pending = { run: hs.run, worker: hs.worker, span: hs.span, device: hs.device, compare: hs.compare };
  resolvePending();
}

function resolvePending(): void {
  if (!state.runs) return;
  const names = state.runs.runs.map((r) => r.name);
  const settled = state.runs.scanned && !state.runs.scanning; // a name not listed now never will be
  const want = pending.run;
  if (want !== undefined) {
    const hit = names.includes(want) ? want : pending.under ? names.find((n) => n.startsWith(`${want}/`)) : undefined;
    if (hit !== undefined) {
      state.run = hit;
      pending.run = undefined;
    } else if (settled) pending = { ...pending, run: undefined, worker: undefined };
  }
  if (pending.compare && (settled || pending.compare.every((n) => names.includes(n)))) {
    state.compare = pending.compare.filter((n) => names.includes(n));
    pending.compare = undefined;
  }
}

/** The worker report the hash names, once the run's report is there (its index, or undefined). */
function takeHashWorker(report: RunReport): number | undefined {
  if (pending.worker === undefined || pending.run !== undefined) return undefined;
  const idx = hashWorker(report, pending);
  pending = { ...pending, worker: undefined, span: undefined, device: undefined };
  return idx;
}

function pickDefaults(): void {
  resolvePending();
  const runs = state.runs?.runs ?? [];
  const names = runs.map((r) => r.name);
  if (!state.run || !names.includes(state.run)) {
    const saved = stored('run');
    const firstGood = runs.find((r) => r.state === 'ready' || r.state === 'partial');
    state.run = saved && names.includes(saved) ? saved : (firstGood?.name ?? names[0] ?? null);
  }
  state.compare = state.compare.filter((n) => names.includes(n));
  const run = state.run;
  if (run && state.compare.length < 2 && names.length >= 2 && !stored('compare-touched')) {
    const rest = names.filter((n) => n !== run);
    state.compare = [run, ...rest].slice(0, 2);
  }
}

// ---- main area --------------------------------------------------------------

/** The run's report, fetched again whenever a file's state changed (the signature): while
 * files are pending, each poll that sees one more done brings its report in. */
async function reportFor(run: RunStatus): Promise<{ report: RunReport; pending: PendingFile[] }> {
  const s = sig(run);
  const hit = state.reports.get(run.name);
  if (hit && hit.sig === s) return hit;
  const got = await fetchReport(run.name);
  state.reports.set(run.name, { sig: s, ...got });
  return got;
}

/** A report's identity (worker, span, device) as one string. */
function identity(w: WorkerReport): string {
  return JSON.stringify(workerKey(w));
}

/** Which report to show: the one shown before (found again by identity), else the user's pick, else the first usable. */
function pickWorker(run: string, report: RunReport): number {
  const before = state.shownWorker.get(run);
  const again = before === undefined ? -1 : report.workers.findIndex((w) => identity(w) === before);
  let idx = again >= 0 ? again : state.worker.get(run);
  if (idx === undefined || idx >= report.workers.length) idx = usable(report)[0] ?? 0;
  state.worker.set(run, idx);
  const w = report.workers[idx];
  if (w) state.shownWorker.set(run, identity(w));
  return idx;
}

let renderSeq = 0;

async function renderMain(force = false): Promise<void> {
  const seq = ++renderSeq;
  const runs = state.runs?.runs ?? [];
  const wanted =
    state.view === 'overview'
      ? `o|${state.run}|${state.worker.get(state.run ?? '') ?? 0}|${sig(runStatus(state.run))}|${state.runs?.scanned}`
      : `${state.view}|${state.compare.join('\u0000')}|${state.compare.map((n) => `${sig(runStatus(n))}:${state.worker.get(n) ?? -1}`).join(';')}|${runs.map((r) => r.name).join('\u0000')}`;
  if (!force && wanted === state.shownSig) return;

  let content: Child;
  try {
    content = state.view === 'overview' ? await overviewContent() : await compareContent(state.view);
  } catch (err) {
    content = errorPanel('Could not load the report', [err instanceof Error ? err.message : String(err)]);
  }
  if (seq !== renderSeq) return; // a newer render started while this one waited
  state.shownSig = wanted;
  disposeCharts(el.main);
  const scroll = document.scrollingElement?.scrollTop ?? 0;
  replace(el.main, content);
  if (!force && document.scrollingElement) document.scrollingElement.scrollTop = scroll;
  renderHeader();
  saveHash(false); // defaults filled in (the run, its worker) complete the link in place
}

async function overviewContent(): Promise<Child> {
  if (!state.runs) return h('p', { class: 'muted' }, 'Loading…');
  if (!state.runs.scanned) return h('p', { class: 'muted' }, h('span', { class: 'spinner' }), ' Scanning the logdir…');
  if (!state.runs.runs.length) return [uploader.emptyHint(), emptyPanel(state.runs?.sources ?? [])];
  const r = runStatus(state.run);
  if (!r) return emptyPanel(state.runs?.sources ?? []);
  if (loadingNow(r) && !r.workers.some((w) => w.spans.some((sp) => sp.state === 'done' || sp.state === 'error')))
    return progressPanel(r); // nothing to show yet
  const { report, pending: pendingFiles } = await reportFor(r);
  if (pendingFiles.length && !report.workers.length) return progressPanel(r);
  // The worker the URL names, once the run is whole (it may be among the files still pending).
  const fromHash = pendingFiles.length ? undefined : takeHashWorker(report);
  if (fromHash !== undefined) {
    state.worker.set(r.name, fromHash);
    state.shownWorker.delete(r.name);
  }
  const idx = pickWorker(r.name, report);
  const failed = report.workers.filter((w) => w.error);
  const w = report.workers[idx];
  const header = h(
    'div',
    { class: 'runbar' },
    h('h1', { class: 'runtitle', testid: 'run-title' }, report.name),
    report.strategy?.length
      ? h(
          'span',
          {
            class: 'pill',
            testid: 'run-strategy',
            title: 'Parallelism detected from the collectives (docs/distributed.md)',
          },
          strategyText(report.strategy),
        )
      : null,
    h('span', { class: 'dim mono small', title: r.path }, r.path),
    h('span', { class: 'spacer' }),
    downloadLinks(report.name, idx),
  );
  if (!w) return [header, errorPanel(`Run ${report.name} has no report`, r.errors)];
  return [
    header,
    failed.length && !(failed.length === 1 && failed[0] === w)
      ? h(
          'div',
          { class: 'banner warn', testid: 'partial-errors' },
          icon(ICONS.warn, 16),
          h(
            'div',
            null,
            h('strong', null, `${failed.length} of ${report.workers.length} reports in this run could not be made`),
            failed.map((fw) => h('div', { class: 'mono' }, `${fw.name}${fw.span ? ` (${fw.span})` : ''}: ${fw.error}`)),
          ),
        )
      : null,
    pendingFiles.length ? partialBanner(r, pendingFiles) : null,
    report.ranks ? ranksCard(report.ranks, report.strategy, pendingFiles) : null,
    renderWorker(w),
  ];
}

async function compareContent(view: View): Promise<Child> {
  const runs = state.runs?.runs ?? [];
  const chips = h(
    'div',
    { class: 'chips', testid: 'compare-picker' },
    h('span', { class: 'dim' }, 'Runs to compare:'),
    runs.map((r) => {
      const on = state.compare.includes(r.name);
      const idx = state.compare.indexOf(r.name);
      return h(
        'label',
        { class: `chip ${on ? 'on' : ''} ${r.state === 'error' ? 'bad' : ''}`, title: r.path },
        h('input', {
          props: { type: 'checkbox', checked: on },
          on: {
            change: (ev) => {
              const checked = (ev.target as HTMLInputElement).checked;
              state.compare = checked ? [...state.compare, r.name] : state.compare.filter((n) => n !== r.name);
              store('compare-touched', '1');
              saveHash(true);
              void renderMain(true);
            },
          },
        }),
        on ? h('span', { class: 'chip-n' }, idx === 0 ? 'base' : String(idx + 1)) : null,
        h('span', null, r.name),
        stateLabel(r) ? h('span', { class: 'dim small' }, ` ${stateLabel(r)}`) : null,
      );
    }),
  );
  if (runs.length < 2)
    return [
      chips,
      h(
        'p',
        { class: 'muted' },
        'Compare needs at least two runs. Point --logdir at a folder with several runs, or use --logdir_spec mine:./logs/a,theirs:/path/to/colleague/logs.',
      ),
    ];
  if (state.compare.length < 2)
    return [
      chips,
      h(
        'p',
        { class: 'muted', testid: 'compare-hint' },
        'Pick two or more runs. The first one picked is the baseline.',
      ),
    ];
  const body = await fetchCompare(state.compare);
  if (view === 'strategies') return [chips, strategiesCard(body.strategies ?? [])];
  const cols: CompareColumn[] = body.runs.map((e) => {
    const good = e.report ? usable(e.report) : [];
    let wi = state.worker.get(e.name);
    if (wi === undefined || !good.includes(wi)) wi = good[0] ?? 0;
    return { run: e.name, report: e.report, progress: e.progress, state: e.state, workerIndex: wi };
  });
  return [
    chips,
    renderCompare(cols, (run, idx) => {
      state.worker.set(run, idx);
      void renderMain(true);
    }),
  ];
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
  renderHeader();
  await renderMain(false);
  const busy = !state.runs?.scanned || state.runs.scanning || (state.runs?.runs ?? []).some(loadingNow);
  timer = window.setTimeout(() => void tick(), busy ? POLL_LOADING_MS : POLL_IDLE_MS);
}

// ---- entry ------------------------------------------------------------------

export function render(): void {
  const style = document.createElement('style');
  style.textContent = cssVariables() + css;
  document.head.appendChild(style);
  const saved = stored('view');
  if (saved === 'compare' || saved === 'overview' || saved === 'strategies') state.view = saved;
  applyHash(readHash()); // a link's view wins over the last one used here
  onHashChange((hs) => {
    const now = hashSnapshot();
    if (JSON.stringify({ ...now, ...hs }) === JSON.stringify(now)) return; // ours, or TensorBoard's own keys
    applyHash(hs);
    renderHeader();
    void renderMain(true);
  });

  el.runSelect.addEventListener('change', () => setRun(el.runSelect.value));
  el.workerSelect.addEventListener('change', () => {
    if (!state.run) return;
    state.worker.set(state.run, Number(el.workerSelect.value));
    state.shownWorker.delete(state.run); // the user's pick, found by index this once
    saveHash(true);
    void renderMain(true);
  });
  replace(
    el.pickers,
    h('label', { class: 'picker' }, h('span', null, 'Run'), el.runSelect),
    h('label', { class: 'picker' }, h('span', null, 'Worker'), el.workerSelect),
  );

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
  const app = h(
    'div',
    { class: 'app' },
    h(
      'header',
      { class: 'topbar' },
      h(
        'div',
        { class: 'brand' },
        h('span', { class: 'logo' }, 'MFU'),
        h('span', { class: 'tagline' }, 'why a busy GPU is slow'),
      ),
      el.tabs,
      el.pickers,
      h('div', { class: 'spacer' }),
      el.status,
      uploader.button,
      refresh,
      el.pytorch,
    ),
    el.loading,
    uploader.panel,
    el.main,
  );
  clear(document.body);
  document.body.appendChild(app);
  uploader.attach(app);
  renderHeader();
  void tick();
}

// The downloaded offline report (tensorboard/offline.py) inlines this bundle: draw it there.
const offline = offlinePayload();
if (offline) renderOffline(offline);
