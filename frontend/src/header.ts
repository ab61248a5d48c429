// The tab's top bar: the view tabs, the run and worker pickers, the status line and the
// loading strip under it, redrawn from the state (appstate.ts) after each change or poll.
import { tensorboardUrl } from './api';
import { state, type View } from './appstate';
import { h, ICONS, icon, replace } from './dom';
import { loadingRows, stateLabel, statusLine } from './status';
import { workerLabel } from './workers';

const VIEWS: View[] = ['overview', 'compare', 'strategies'];
const VIEW_LABEL: Record<View, string> = { overview: 'Overview', compare: 'Compare', strategies: 'Strategies' };

/** What the header's controls do; the entry point (index.ts) owns the redraws. */
export interface HeaderActions {
  view(v: View): void;
  run(name: string): void;
  worker(idx: number): void;
}

/** The logo and the line under it, here and in the saved offline report. */
export function brand(tagline: string): HTMLElement {
  return h('div', { class: 'brand' }, h('span', { class: 'logo' }, 'MFU'), h('span', { class: 'tagline' }, tagline));
}

/** A saved offline page's header (index.ts): its tagline, its views, no link out. */
export interface HeaderOptions {
  tagline?: string;
  views?: View[];
  external?: boolean; // the link to the PyTorch Profiler tab
}

export class Header {
  readonly runSelect = h('select', { testid: 'run-select', title: 'Run' });
  readonly workerSelect = h('select', { testid: 'worker-select', title: 'Worker · device · span' });
  readonly tabs = h('nav', { class: 'tabs' });
  readonly status = h('span', { class: 'status', testid: 'load-status' });
  readonly loading = h('div', { class: 'loading-strip', testid: 'loading' });
  readonly pytorch = h(
    'a',
    { class: 'ext', testid: 'pytorch-link', props: { target: '_top', rel: 'noopener' } },
    'PyTorch Profiler',
    icon(ICONS.external, 12),
  );
  readonly pickers = h('div', { class: 'pickers' });

  constructor(
    private readonly actions: HeaderActions,
    private readonly opts: HeaderOptions = {},
  ) {}

  /** The top bar, its pickers wired; ``tools`` go at its right end (upload, refresh). */
  topbar(...tools: Node[]): HTMLElement {
    this.runSelect.addEventListener('change', () => this.actions.run(this.runSelect.value));
    this.workerSelect.addEventListener('change', () => this.actions.worker(Number(this.workerSelect.value)));
    replace(
      this.pickers,
      h('label', { class: 'picker' }, h('span', null, 'Run'), this.runSelect),
      h('label', { class: 'picker' }, h('span', null, 'Worker'), this.workerSelect),
    );
    // Two groups: the view and what it shows on the left, the status and the tools on the
    // right; on a narrow window the right group wraps under the left one, never over it.
    return h(
      'header',
      { class: 'topbar' },
      h('div', { class: 'topbar-main' }, brand(this.opts.tagline ?? 'why a busy GPU is slow'), this.tabs, this.pickers),
      h('div', { class: 'topbar-tools' }, this.status, ...tools, this.opts.external === false ? null : this.pytorch),
    );
  }

  render(): void {
    this.renderTabs();
    this.renderPickers();
    this.pytorch.href = tensorboardUrl('pytorch_profiler');
    this.pytorch.title = state.run
      ? `Open the stock PyTorch Profiler tab (choose run "${state.run}" there): traces, operators, memory.`
      : 'Open the stock PyTorch Profiler tab';
    replace(this.status, statusLine(state.runs, state.runsError));
    const items = loadingRows(state.runs);
    replace(this.loading, items);
    this.loading.classList.toggle('hidden', !items.length);
  }

  private renderTabs(): void {
    const views = this.opts.views ?? VIEWS;
    replace(
      this.tabs,
      (views.length > 1 ? views : []).map((v) =>
        h(
          'button',
          {
            class: `tab ${state.view === v ? 'active' : ''}`,
            testid: `tab-${v}`,
            attrs: { role: 'tab', 'aria-selected': String(state.view === v) },
            on: { click: () => this.actions.view(v) },
          },
          VIEW_LABEL[v],
        ),
      ),
    );
  }

  /** The runs, and the worker reports of the run shown (from its report, when there is one). */
  private renderPickers(): void {
    const runs = state.runs?.runs ?? [];
    replace(
      this.runSelect,
      runs.map((r) => {
        const label = stateLabel(r);
        return h(
          'option',
          { props: { value: r.name, selected: r.name === state.run } },
          label ? `${r.name} — ${label}` : r.name,
        );
      }),
    );
    this.runSelect.disabled = !runs.length;
    const report = state.run ? state.reports.get(state.run)?.report : undefined;
    const cur = state.run ? (state.worker.get(state.run) ?? 0) : 0;
    const options = report
      ? report.workers.map((w, i) =>
          h('option', { props: { value: String(i), selected: i === cur } }, workerLabel(w, report)),
        )
      : [];
    replace(this.workerSelect, options);
    this.workerSelect.disabled = options.length < 2;
    this.pickers.classList.toggle('hidden', state.view !== 'overview');
  }
}
