// What the main area shows in each view: the Overview of the run and worker report picked,
// or the runs picked side by side (Compare, Strategies), with the chips that pick them.
import { fetchCompare, isOffline } from './api';
import {
  comparePicked,
  compareWorker,
  pickWorker,
  reportFor,
  runStatus,
  saveHash,
  sig,
  state,
  store,
  suggestion,
  takeHashWorker,
  type View,
} from './appstate';
import { banner } from './card';
import { strategyText } from './communication';
import { type CompareColumn, renderCompare } from './compare';
import { type Child, h } from './dom';
import { rooted } from './field';
import { downloadLinks } from './offline';
import { renderWorker } from './overview';
import { ranksCard } from './ranks';
import { emptyPanel, errorPanel, loadingNow, partialBanner, progressPanel, stateLabel } from './status';
import { strategiesCard } from './strategies';
import type { RunReport, RunStatus, WorkerReport } from './types';

/** What the main area would show now, as one string: it is redrawn only when this changes. */
export function mainSig(): string {
  const runs = state.runs?.runs ?? [];
  if (!state.runs) return `none|${state.runsError ?? ''}`;
  return state.view === 'overview'
    ? `o|${state.run}|${state.worker.get(state.run ?? '') ?? 0}|${sig(runStatus(state.run))}|${state.runs?.scanned}`
    : `${state.view}|${state.compare.join('\u0000')}|${state.compare.map((n) => `${sig(runStatus(n))}:${state.worker.get(n) ?? -1}`).join(';')}|${runs.map((r) => r.name).join('\u0000')}`;
}

// ---- Overview -------------------------------------------------------------------

/** Before the first list of runs: waiting for it, or why it did not come (never a spinner
 * that turns forever: the tab asks again every second and says so). */
function noRunsYet(): HTMLElement {
  if (!state.runsError)
    return h('p', { class: 'muted' }, h('span', { class: 'spinner' }), ' Asking the server for the runs…');
  return errorPanel('Cannot reach the MFU plugin of this TensorBoard', [
    state.runsError,
    'The tab asks again every second: it fills in once the server answers.',
  ]);
}

/** The run's title line: its name, strategy, path and the download links (none in a saved page). */
function runbar(report: RunReport, r: RunStatus, idx: number): HTMLElement {
  return h(
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
    h('span', { class: 'dim mono small runpath may-overflow', title: r.path }, r.path),
    h('span', { class: 'spacer' }),
    isOffline() ? null : downloadLinks(report.name, idx),
  );
}

/** The reports of the run that failed, unless the one shown is the only one. */
function failedBanner(report: RunReport, shown: WorkerReport): HTMLElement | null {
  const failed = report.workers.filter((w) => w.error);
  if (!failed.length || (failed.length === 1 && failed[0] === shown)) return null;
  return banner(
    'warn',
    'partial-errors',
    `${failed.length} of ${report.workers.length} reports in this run could not be made`,
    failed.map((fw) => h('div', { class: 'mono' }, `${fw.name}${fw.span ? ` (${fw.span})` : ''}: ${fw.error}`)),
  );
}

/** The ranks table's note on ``w``: its gains are of its own step, not the job's (RankRow.waited_note). */
function waitedNote(report: RunReport, w: WorkerReport | undefined): string | null {
  const row = report.ranks?.ranks.find((r) => w && r.worker === w.name && r.span === w.span);
  return row?.waited_note ?? null;
}

/** The Overview of the run picked; ``emptyHint`` leads the page when there is no run at all. */
export async function overviewContent(emptyHint: () => Child): Promise<Child> {
  if (!state.runs) return noRunsYet();
  if (!state.runs.scanned) return h('p', { class: 'muted' }, h('span', { class: 'spinner' }), ' Scanning the logdir…');
  if (!state.runs.runs.length) return [emptyHint(), emptyPanel(state.runs?.sources ?? [])];
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
  const w = report.workers[idx];
  const header = runbar(report, r, idx);
  if (!w) return [header, errorPanel(`Run ${report.name} has no report`, r.errors)];
  return [
    header,
    failedBanner(report, w),
    pendingFiles.length ? partialBanner(r, pendingFiles) : null,
    report.ranks ? ranksCard(report.ranks, report.strategy, pendingFiles) : null,
    rooted(renderWorker(w, report.ranks?.job ?? null, waitedNote(report, w)), `workers.${idx}`),
  ];
}

// ---- Compare and Strategies ----------------------------------------------------------

/** A checkbox per run: the runs to compare. In Compare they are numbered in the order picked and
 * the first is the baseline the others' deltas are against; Strategies has no baseline. */
function compareChips(view: View, rerender: () => void): HTMLElement {
  const runs = state.runs?.runs ?? [];
  return h(
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
              rerender();
            },
          },
        }),
        on && view === 'compare'
          ? h(
              'span',
              { class: 'chip-n', title: idx === 0 ? 'The baseline: the other runs are compared against it' : '' },
              idx === 0 ? 'baseline' : String(idx + 1),
            )
          : null,
        h('span', null, r.name),
        stateLabel(r) ? h('span', { class: 'dim small' }, ` ${stateLabel(r)}`) : null,
      );
    }),
  );
}

/** Compare or Strategies of the runs picked; ``rerender`` redraws after a pick. */
export async function compareContent(view: View, rerender: () => void): Promise<Child> {
  if (!state.runs) return noRunsYet();
  const runs = state.runs.runs;
  const chips = compareChips(view, rerender);
  if (runs.length < 2)
    return [
      chips,
      h(
        'p',
        { class: 'muted' },
        'Compare needs at least two runs. Point --logdir at a folder with several runs, or use --logdir_spec mine:./logs/a,theirs:/path/to/colleague/logs.',
      ),
    ];
  const suggested = comparePicked() ? undefined : suggestion(view);
  if (state.compare.length < 2)
    return [
      chips,
      h(
        'p',
        { class: 'muted', testid: 'compare-hint' },
        suggested?.reason ??
          (view === 'compare'
            ? 'Pick two or more runs. The first one picked is the baseline.'
            : 'Pick two or more runs.'),
      ),
    ];
  const why = suggested?.runs.length ? h('p', { class: 'dim small', testid: 'compare-why' }, suggested.reason) : null;
  const body = await fetchCompare(state.compare);
  if (view === 'strategies') return [chips, why, strategiesCard(body.strategies ?? [])];
  const cols: CompareColumn[] = body.runs.map((e) => ({
    run: e.name,
    report: e.report,
    progress: e.progress,
    state: e.state,
    workerIndex: compareWorker(e.name, e.report),
  }));
  return [
    chips,
    why,
    renderCompare(
      cols,
      (run, idx) => {
        state.worker.set(run, idx);
        rerender();
      },
      body.findings ?? [],
      body.deltas ?? [],
      body.rows ?? null,
    ),
  ];
}
