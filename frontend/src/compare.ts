// Compare: two or more runs side by side, deltas against the first (the baseline).
import { card } from './card';
import { axisTooltip, chart, msPerStepAxis, tooltipNode } from './charts';
import { AGGREGATION } from './definitions';
import { type Child, h } from './dom';
import { field, scope } from './field';
import * as f from './format';
import { deltaNode, figureHead, figureText, pairOf } from './metrics';
import { COLORS, UI } from './palette';
import type { FindingChange, FindingsAgainstBaseline, KernelDelta, WorkerDeltas } from './report_types';
import { BREAKDOWN, partUs } from './steps';
import { type Column, kernelFilter, kernelNameColumn, table } from './table';
import { compareTimelines } from './timeline_compare';
import type { CompareRows, RunReport, Summary, WorkerReport } from './types';
import { usable, workerLabel } from './workers';

export interface CompareColumn {
  run: string;
  report: RunReport | null;
  progress: number;
  state: string;
  workerIndex: number;
}

/** The table's head: a column per run, with its worker picker when it has several. */
function headerRow(cols: CompareColumn[], onWorker: (run: string, idx: number) => void): HTMLElement {
  return h(
    'tr',
    null,
    h('th', null, 'Metric'),
    cols.map((c, i) => {
      const r = c.report;
      const opts = r ? usable(r) : [];
      return h(
        'th',
        { class: 'num runcol' },
        h(
          'div',
          { class: 'runhead' },
          h('span', { class: 'swatch', style: { background: COLORS.runs[i % COLORS.runs.length] } }),
          h('span', { class: 'runname', title: c.run }, c.run),
          i === 0 ? h('span', { class: 'pill base' }, 'baseline') : null,
        ),
        r && opts.length > 1
          ? h(
              'select',
              {
                class: 'mini',
                title: 'Worker / device / span of this run',
                on: { change: (ev) => onWorker(c.run, Number((ev.target as HTMLSelectElement).value)) },
              },
              opts.map((wi) =>
                h(
                  'option',
                  { props: { value: String(wi), selected: wi === c.workerIndex } },
                  workerLabel(r.workers[wi], r),
                ),
              ),
            )
          : r && opts.length === 1
            ? h('div', { class: 'dim small' }, workerLabel(r.workers[opts[0]], r))
            : null,
      );
    }),
  );
}

/** A row per figure of the /compare body's pairs: each run's figure, and its change against the
 * baseline's (analysis/run/compare.py computed both; the rows are the baseline's pair's). */
function metricRows(cols: CompareColumn[], deltas: WorkerDeltas[], which: CompareRows | null): HTMLElement[] {
  const base = cols[0];
  const own = (c: CompareColumn) => pairOf(deltas, c.run, c.workerIndex, c.run, c.workerIndex);
  const rows = own(base)?.pair.figures ?? deltas[0]?.figures ?? [];
  // the rows analysis.run.compare.rows_of_runs shows (the CLI's, for the same runs)
  const shown = rows.map((row, k) => ({ row, k })).filter(({ row }) => !which || which.shown.includes(row.figure));
  return shown.map(({ row, k }) =>
    h(
      'tr',
      null,
      figureHead(row),
      cols.map((c, i) => {
        if (!c.report) return h('td', { class: 'num dim' }, `loading ${f.pct(c.progress, 0)}`);
        const w = c.report.workers[c.workerIndex];
        const mine = own(c);
        if (!w?.summary || !mine) return h('td', { class: 'num dim', title: w?.error ?? '' }, 'error');
        const d = mine.pair.figures[k];
        const vs = i > 0 ? pairOf(deltas, c.run, c.workerIndex, base.run, base.workerIndex) : null;
        return h(
          'td',
          { class: 'num' },
          h('span', { class: 'val', data: field(`/deltas.${mine.index}.figures.${k}.value`) }, figureText(d, w)),
          vs ? deltaNode(vs.pair.figures[k], `/deltas.${vs.index}.figures.${k}.delta`) : null,
        );
      }),
    ),
  );
}

export function renderCompare(
  cols: CompareColumn[],
  onWorker: (run: string, idx: number) => void,
  findings: FindingsAgainstBaseline[] = [],
  deltas: WorkerDeltas[] = [],
  which: CompareRows | null = null,
): HTMLElement {
  const ready = drawable(cols);
  const header = headerRow(cols, onWorker);
  const body = metricRows(cols, deltas, which);
  const errors = cols.flatMap((c) =>
    c.report ? c.report.workers.filter((w) => w.error).map((w) => `${c.run} · ${w.name}: ${w.error}`) : [],
  );
  return h(
    'div',
    { class: 'compare', testid: 'compare' },
    card(
      'Side by side',
      [
        h(
          'p',
          { class: 'explain compare-key', testid: 'compare-key' },
          'Each delta is against the baseline, ',
          h('strong', null, cols[0].run),
          ' (the first run picked). Green and red mark a faster or slower run: MFU, achieved FLOP/s, step time, and the memory it needs. ',
          'The other rows explain those figures and stay grey: a busier GPU is not a faster step.',
        ),
        h(
          'div',
          { class: 'table-wrap may-overflow' },
          h(
            'table',
            { class: 'grid compare-table', testid: 'compare-table' },
            h('thead', null, header),
            h('tbody', null, body),
          ),
        ),
        which?.why
          ? h('p', { class: 'dim small', testid: 'compare-no-memory' }, `No memory rows: ${which.why}.`)
          : null,
      ],
      {
        help: `Shares ${AGGREGATION}, counts per mean step, step time the mean step; each row's tooltip is its definition. Deltas are against the baseline (the first run picked): percentage points (pp) for shares, relative change otherwise.`,
        cls: 'wide',
      },
    ),
    ready.length ? compositionChart(ready) : null,
    ready.length >= 2 ? findingsDiff(ready, findings) : null,
    ready.length >= 2 ? kernelDiff(ready, deltas) : null,
    compareTimelines(ready.map((d) => ({ run: d.run, worker: d.worker }))),
    errors.length
      ? h(
          'div',
          { class: 'banner warn' },
          h(
            'ul',
            null,
            errors.map((e) => h('li', { class: 'mono' }, e)),
          ),
        )
      : null,
  );
}

/** A column whose chosen worker report has a summary: what the chart and the diffs draw. */
interface Drawn {
  run: string;
  col: number; // of its run in the /compare body's runs
  index: number; // of the worker in its run's report
  worker: WorkerReport;
  summary: Summary;
}

function drawable(cols: CompareColumn[]): Drawn[] {
  const out: Drawn[] = [];
  cols.forEach((c, col) => {
    const w = c.report && usable(c.report).length ? c.report.workers[c.workerIndex] : undefined;
    if (w?.summary) out.push({ run: c.run, col, index: c.workerIndex, worker: w, summary: w.summary });
  });
  return out;
}

function compositionChart(cols: Drawn[]): HTMLElement {
  const el = h('div', {
    class: 'chart chart-compare',
    testid: 'compare-chart',
    style: { height: `${Math.max(140, 60 + cols.length * 44)}px` },
  });
  const names = cols.map((c) => c.run);
  queueMicrotask(() =>
    chart(el, {
      color: BREAKDOWN.map((b) => b.color),
      grid: { left: 16, right: 24, top: 34, bottom: 28, containLabel: true },
      legend: { top: 0, icon: 'roundRect', itemWidth: 12, itemHeight: 10 },
      yAxis: {
        type: 'category',
        inverse: true,
        data: names.map((_, i) => String(i)),
        axisTick: { show: false },
        axisLabel: {
          // category labels are run names: ECharts draws them on the canvas as text, whole,
          // broken onto more lines where one is too long (run names have no spaces to wrap at)
          formatter: (v: string) => names[Number(v)],
          width: 180,
          overflow: 'breakAll',
          lineHeight: 14,
          color: UI.text,
        },
      },
      xAxis: msPerStepAxis(),
      tooltip: {
        ...axisTooltip(),
        formatter: (ps: { dataIndex: number }[]) => {
          const i = ps[0].dataIndex;
          const s = cols[i].summary;
          return tooltipNode(
            `${names[i]} · mean step ${f.dur(s.step_time_us)}`,
            BREAKDOWN.map((b) => [b.color, b.label, `${f.dur(partUs(s, b.key))} · ${f.pct(s.breakdown?.[b.key])}`]),
          );
        },
      },
      series: BREAKDOWN.map((b) => ({
        name: b.label,
        type: 'bar',
        stack: 'step',
        barMaxWidth: 26,
        // a part the report has no time for has no bar ('-'), never one at 0
        data: cols.map((c) => {
          const us = partUs(c.summary, b.key);
          return us === null ? '-' : +(us / 1000).toFixed(3);
        }),
      })),
    }),
  );
  return card('Mean step, composed', el, {
    help: 'Where the mean step of each run goes (time-weighted over its profiled steps). The same colours as the Overview.',
    cls: 'wide',
  });
}

/** A signed change of time per step: red when it grew, green when it shrank (past the noise). */
function diffCell(r: KernelDelta, path: string): HTMLElement {
  const d = r.delta_us_per_step;
  const cls = r.verdict === 'better' ? 'good' : r.verdict === 'worse' ? 'bad' : 'neutral';
  return h(
    'span',
    { class: `delta ${cls}`, data: field(`${path}.delta_us_per_step`) },
    `${d > 0 ? '+' : d < 0 ? '−' : '±'}${f.dur(Math.abs(d))}`,
  );
}

/** A kernel's time per step in one run, or that the run's top list does not hold it (its Δ then
 * takes it as 0: it ran for less than the last kernel listed, or not at all). */
function perStepCell(us: number | null, path: string): Child {
  if (us !== null) return h('span', { data: field(path) }, f.dur(us));
  return h('span', { class: 'dim', title: "Not among this run's top kernels: the Δ takes it as 0" }, 'not in top list');
}

/** The top kernels of the first two runs, as the /compare body's pair of their workers has them. */
function kernelDiff(cols: Drawn[], deltas: WorkerDeltas[]): HTMLElement | null {
  const found = pairOf(deltas, cols[1].run, cols[1].index, cols[0].run, cols[0].index);
  if (!found) return null;
  const at = (r: KernelDelta) => `/deltas.${found.index}.kernels.${found.pair.kernels.indexOf(r)}`;
  const columns: Column<KernelDelta>[] = [
    kernelNameColumn(),
    {
      key: 'base',
      label: 'Baseline / step',
      num: true,
      value: (r) => r.baseline_us_per_step,
      cell: (r) => perStepCell(r.baseline_us_per_step, `${at(r)}.baseline_us_per_step`),
    },
    {
      key: 'other',
      label: `${cols[1].run} / step`,
      num: true,
      value: (r) => r.us_per_step,
      cell: (r) => perStepCell(r.us_per_step, `${at(r)}.us_per_step`),
    },
    { key: 'diff', label: 'Δ / step', num: true, value: (r) => r.delta_us_per_step, cell: (r) => diffCell(r, at(r)) },
  ];
  return card(
    `Kernels that changed: ${cols[1].run} vs ${cols[0].run}`,
    table<KernelDelta>(found.pair.kernels, columns, { testid: 'kernel-diff', maxRows: 12, ...kernelFilter }),
    {
      help: "Time per step of the top kernels of both runs, the most changed first; a kernel not in one run's top list counts as 0 there.",
      cls: 'wide',
    },
  );
}

/** The findings of a column against the baseline, as diagnosis/compare.py computed them for the
 * two workers shown (the /compare body's ``findings``); the tab only looks them up. */
function changesOf(findings: FindingsAgainstBaseline[], c: Drawn, base: Drawn): FindingChange[] | undefined {
  return findings.find((x) => x.run === c.run && x.worker === c.index && x.baseline_worker === base.index)?.changes;
}

/** A finding's name: its id, and its subject when the rule fires once per subject. */
function findingName(c: FindingChange): string {
  return c.subject ? `${c.id} · ${c.subject}` : c.id;
}

function gainNode(severity: string | null, gainUs: number | null, share: number | null, title: string): Child {
  if (severity === null) return h('span', { class: 'dim small' }, 'not found');
  return h(
    'span',
    { class: 'fcell', title },
    h('span', { class: `sev sev-${severity}` }, severity),
    h('span', { class: 'small dim' }, ` ${f.dur(gainUs)} · ${f.pct(share)}`),
  );
}

/** A column's cell of one finding: the baseline shows its own finding; another run what the
 * diagnosis marked: fixed (gone), new (only here) or the finding as it remains. */
function findingCell(c: FindingChange | undefined, baseline: boolean): Child {
  if (!c) return h('span', { class: 'dim small' }, 'not found');
  if (baseline) return gainNode(c.baseline_severity, c.baseline_gain_us_per_step, c.baseline_gain_share, c.title);
  if (c.status === 'fixed') return h('span', { class: 'change change-fixed', testid: 'finding-fixed' }, 'fixed');
  const cell = gainNode(c.severity, c.gain_us_per_step, c.gain_share, c.title);
  return c.status === 'new'
    ? h('span', null, h('span', { class: 'change change-new', testid: 'finding-new' }, 'new'), cell)
    : cell;
}

function findingsDiff(cols: Drawn[], findings: FindingsAgainstBaseline[]): HTMLElement | null {
  const base = cols[0];
  const per = cols.slice(1).map((c) => changesOf(findings, c, base) ?? []);
  // every finding of any column, in the order first seen (each list: the baseline's, then its new)
  const rows = new Map<string, FindingChange>();
  for (const changes of per) for (const c of changes) if (!rows.has(findingName(c))) rows.set(findingName(c), c);
  if (!rows.size) return null;
  const head = h(
    'tr',
    null,
    h('th', null, 'Finding'),
    cols.map((c) => h('th', { class: 'num' }, h('span', { class: 'runname', title: c.run }, c.run))),
  );
  // each change's path in the body (field.ts), for the cells that show it
  const at = new Map(findings.flatMap((x, k) => x.changes.map((c, j) => [c, `findings.${k}.changes.${j}`] as const)));
  const cellData = (c: FindingChange | undefined) => (c && at.has(c) ? scope(at.get(c) ?? '') : undefined);
  const body = Array.from(rows, ([name, first]) =>
    h(
      'tr',
      null,
      h('td', { title: first.title }, h('code', { class: 'finding-id' }, name)),
      h('td', { class: 'num', data: cellData(first) }, findingCell(first.status === 'new' ? undefined : first, true)),
      per.map((changes) => {
        const c = changes.find((x) => findingName(x) === name);
        return h('td', { class: 'num', data: cellData(c) }, findingCell(c, false));
      }),
    ),
  );
  // every finding of a run fixed at once (WorkerReport.combined_gain_us_per_step): not the column's sum
  const together = (w: WorkerReport): Child => {
    const us = w.combined_gain_us_per_step;
    if (!f.isNumber(us) || w.findings.length < 2) return h('span', { class: 'dim' }, f.NA);
    return h('span', { class: 'small' }, `${f.dur(us)} · ${f.pct(w.combined_gain_share ?? null)}`);
  };
  body.push(
    h(
      'tr',
      { class: 'combined-row', testid: 'findings-together' },
      h(
        'td',
        { title: 'every finding of the run fixed at once (the Overview says how)' },
        h('strong', null, 'All together'),
      ),
      cols.map((c) => {
        const w = `runs.${c.col}.report.workers.${c.index}`;
        return h(
          'td',
          { class: 'num', data: scope(`${w}.combined_gain_us_per_step ${w}.combined_gain_share`) },
          together(c.worker),
        );
      }),
    ),
  );
  return card(
    'Findings by run',
    h(
      'div',
      { class: 'table-wrap may-overflow' },
      h('table', { class: 'grid', testid: 'findings-diff' }, h('thead', null, head), h('tbody', null, body)),
    ),
    {
      help: 'Which diagnosis findings each run has, with the estimated gain per step. Against the baseline (first column): "fixed" = gone in this run, "new" = only in this run (diagnosis/compare.py marks them; the CLI\'s compare shows the same).',
      cls: 'wide',
    },
  );
}
