// The Overview of one worker report (one device of one span of one run): the headline
// figures, then the cards of the other modules in their order on the page.
import { copiesCard, kernelsCard, launchesCard, syncsCard } from './activity';
import { banner, card } from './card';
import { chart, tooltipBase, tooltipNode } from './charts';
import { communicationCard } from './communication';
import { AGGREGATION } from './definitions';
import { findingsCard } from './diagnosis';
import { type Child, h, ICONS, icon } from './dom';
import { field, fv, scope } from './field';
import { flopsCard, mfuHeadline, peakInfo, showWhy } from './flops';
import * as f from './format';
import { memoryCard } from './memory';
import { COLORS, UI } from './palette';
import { rooflineCard } from './roofline';
import { stepBreakdownSummary, stepsChart } from './steps';
import { linkFindings, timelineCard } from './timeline';
import type { Interval, JobMfu, Summary, WorkerReport } from './types';
import { waterfallCard } from './waterfall';
import { criticalPathCard, whatIfCard } from './whatif';

/** "346.3 TFLOP/s" -> number, then the unit in a smaller span (the text stays "346.3 TFLOP/s"). */
function valueWithUnit(value: string): Child[] {
  const m = /^(.*\d)( [^\d\s]+)$/.exec(value);
  return m ? [m[1], h('span', { class: 'unit' }, m[2])] : [value];
}

function kpi(
  label: string,
  value: string,
  sub: Child,
  opts: { testid?: string; raw?: number | null; cls?: string; title?: string; field?: string; scope?: string } = {},
): HTMLElement {
  const raw: Record<string, string> =
    opts.raw === undefined ? {} : { value: opts.raw === null ? '' : String(opts.raw) };
  return h(
    'div',
    { class: `kpi ${opts.cls ?? ''}`, title: opts.title },
    h('div', { class: 'kpi-label' }, label),
    h(
      'div',
      { class: 'kpi-value', testid: opts.testid, data: { ...raw, ...(opts.field ? field(opts.field) : {}) } },
      ...valueWithUnit(value),
    ),
    h('div', { class: 'kpi-sub', data: opts.scope ? scope(opts.scope) : undefined }, sub),
  );
}

/** The MFU, or why there is none, over the FLOPs per step and the peak it was measured against. */
function mfuKpi(w: WorkerReport, s: Summary, impossible: boolean, job: JobMfu | null): HTMLElement {
  const fl = w.flops;
  const mfu = f.isNumber(s.mfu) ? s.mfu : null;
  const hasMfu = mfu !== null;
  const src = fl?.headline_source ?? fl?.source ?? null;
  const peak = peakInfo(w);
  const mfuSub = hasMfu
    ? [
        h(
          'div',
          { data: scope('summary') },
          `${overSteps(s)} · ${f.figure('flops_per_step', s.flops_per_step)} per step${src ? ` · ${src}` : ''}`,
        ),
        // the convention and basis said on the page, the second figure named for what it is
        h(
          'div',
          { testid: 'mfu-basis', data: scope('summary') },
          s.mfu_status?.basis === 'without_profiler'
            ? `without the profiler's drag (est.) · ${f.label('mfu_traced')} ${f.figure('mfu_traced', s.mfu_traced)}`
            : 'over the steps as traced (a lower bound)',
        ),
        s.mfu_range
          ? h(
              'div',
              { testid: 'mfu-range', title: f.definition('mfu_range'), data: scope('summary') },
              likelyNote(s.mfu_range),
            )
          : null,
        peak ? h('div', { title: peak.long, data: scope('device') }, peak.short) : null,
        jobNote(w, s, job),
      ]
    : [
        // the headline only: the whole reason and what to do stand in the FLOPs card (flops.ts)
        h('div', { class: 'kpi-why', testid: 'mfu-why' }, mfuHeadline(w)),
        h('button', { class: 'link', testid: 'mfu-why-link', on: { click: () => showWhy() } }, 'Why, and what to do ↓'),
        peak ? h('div', { title: peak.long, data: scope('device') }, peak.short) : null,
      ];
  return kpi(f.label('mfu'), hasMfu ? f.figure('mfu', s.mfu) : impossible ? 'impossible' : f.NA, mfuSub, {
    testid: 'mfu-value',
    raw: mfu,
    field: 'summary.mfu',
    cls: `kpi-main ${hasMfu ? '' : 'kpi-na'}`,
    title: `${f.definition('mfu')}. ${s.mfu_status?.basis === 'without_profiler' ? `Over the step without the profiler's host cost (${f.dur(s.step_time_unprofiled_us)}, estimated${s.step_time_unprofiled_range_us ? `; likely ${likely(s.step_time_unprofiled_range_us, f.dur)}` : ''}); over the traced steps: ${f.pct(s.mfu_traced)}.` : 'Over the traced steps: a lower bound, the profiler stretches CPU-bound steps.'}`,
  });
}

/** Under a rank's MFU, the job's where it reads otherwise (RankSummary.job): over the job's step where
 * this rank waited for others (its estimate keeps their profiled lateness), or over every rank's FLOPs
 * where the step is this rank's own and the ranks compute different FLOPs (pipeline stages). */
function jobNote(w: WorkerReport, s: Summary, job: JobMfu | null): HTMLElement | null {
  if (!job || f.pct(job.mfu) === f.pct(s.mfu)) return null;
  const why =
    job.worker === w.name
      ? ": the same step, over every rank's FLOPs, which differ by rank"
      : `: this rank's step keeps the profiled lateness of the ranks it waited for${job.flops_differ ? ", and the ranks' FLOPs differ" : ''}`;
  return h(
    'div',
    { testid: 'mfu-job', title: f.definition('ranks.job.mfu') },
    // the run's figure, outside this worker's root: its path is absolute
    h('strong', null, `${f.label('ranks.job.mfu')} `, fv('/ranks.job.mfu', f.pct(job.mfu))),
    ` over every rank (Ranks card)${why}`,
  );
}

/** An estimate's likely range, "18.4 %–22.9 %", each end in the figure's own format; one figure
 * where both ends read the same (a GPU-bound step, which the profiler's cost hardly moves). */
function likely(r: Interval, fmt: (x: number) => string): string {
  const [low, high] = [fmt(r.low), fmt(r.high)];
  return low === high ? low : `${low}–${high}`;
}

/** The line under the MFU: where it likely lies as the profiler's cost varies. */
function likelyNote(r: Interval): string {
  return f.pct(r.low) === f.pct(r.high)
    ? `likely ${f.pct(r.low)}: the profiler's cost hardly moves it`
    : `likely ${likely(r, f.pct)}, as the profiler's cost varies`;
}

/** What a headline figure is over: "over the 3 analysed steps" (time-weighted, as MFU). */
function overSteps(s: Summary): string {
  return `over the ${f.counted(s.steps, 'analysed step')}`;
}

/** The achieved FLOP/s over the step, and while the GPU was busy (both from the report). */
function achievedKpi(w: WorkerReport, s: Summary, impossible: boolean): HTMLElement {
  const achieved = s.achieved_flops ?? null;
  const busyT = w.flops?.achieved_tflops_while_busy ?? null;
  return kpi(
    f.label('achieved_flops'),
    achieved !== null ? f.figure('achieved_flops', achieved) : impossible ? 'impossible' : f.NA,
    busyT !== null
      ? [
          fv('flops.achieved_tflops_while_busy', f.figure('flops.achieved_tflops_while_busy', busyT)),
          ' while GPU busy, traced',
        ]
      : impossible
        ? 'above the peak: see MFU'
        : 'needs a FLOP count from the shapes',
    {
      title: `${f.definition('achieved_flops')}. While GPU busy: ${f.definition('flops.achieved_tflops_while_busy')}.`,
      field: 'summary.achieved_flops',
    },
  );
}

function kpis(w: WorkerReport, s: Summary, job: JobMfu | null): HTMLElement {
  const impossible = s.mfu_status?.state === 'impossible';
  return h(
    'div',
    { class: 'kpis' },
    mfuKpi(w, s, impossible, job),
    achievedKpi(w, s, impossible),
    kpi(
      f.label('step_time_us'),
      f.figure('step_time_us', s.step_time_us),
      `${s.basis?.description ?? f.counted(s.steps, 'step')} · median ${f.figure('step_time_median_us', s.step_time_median_us)}`,
      {
        testid: 'step-time',
        field: 'summary.step_time_us',
        scope: 'summary',
        title: `${f.definition('step_time_us')}. Median: ${f.definition('step_time_median_us')}. The shares on this page are ${AGGREGATION}, like MFU and the PyTorch Profiler tab.${(s.basis?.left_out ?? []).map((l) => ` Left out: step ${l.step ?? '?'}, ${l.reason}.`).join('')}`,
      },
    ),
    kpi(
      f.label('gpu_busy_share'),
      f.figure('gpu_busy_share', s.gpu_busy_share),
      `${overSteps(s)} · kernels ${f.figure('kernel_time_share', s.kernel_time_share)}`,
      {
        testid: 'gpu-busy',
        field: 'summary.gpu_busy_share',
        scope: 'summary',
        title: `${f.definition('gpu_busy_share')}, ${AGGREGATION}. Kernel time: ${f.definition('kernel_time_share')}.`,
      },
    ),
    kpi(
      f.label('sm_efficiency'),
      f.figure('sm_efficiency', s.sm_efficiency),
      `occupancy ${f.figure('achieved_occupancy', s.achieved_occupancy)}`,
      {
        title: `${f.definition('sm_efficiency')}, ${AGGREGATION}. Occupancy: ${f.definition('achieved_occupancy')}.`,
        field: 'summary.sm_efficiency',
        scope: 'summary',
      },
    ),
    kpi(
      'Tensor cores',
      f.figure('tensor_core_kernel_share', s.tensor_core_kernel_share),
      `of kernel time · unknown ${f.figure('unknown_core_kernel_share', s.unknown_core_kernel_share ?? 0)}`,
      {
        testid: 'tensor-core-kpi',
        field: 'summary.tensor_core_kernel_share',
        scope: 'summary',
        title: `${f.definition('tensor_core_kernel_share')}. Unknown: ${f.definition('unknown_core_kernel_share')}.`,
      },
    ),
  );
}

/** A bar of the busy chart: label, share, colour, what it counts. */
type BusyBar = [string, number | null | undefined, string, string];

/** The four shares from busy to useful as horizontal bars out of 100 %. */
function busyChart(rows: BusyBar[]): HTMLElement {
  const el = h('div', { class: 'chart chart-short', testid: 'busy-chart' });
  queueMicrotask(() =>
    chart(el, {
      grid: { left: 100, right: 70, top: 6, bottom: 24 },
      xAxis: {
        type: 'value',
        max: 100,
        axisLabel: { formatter: '{value} %', color: UI.dim },
        splitLine: { lineStyle: { color: UI.lineSoft } },
      },
      yAxis: {
        type: 'category',
        inverse: true,
        data: rows.map((r) => r[0]),
        axisTick: { show: false },
        axisLabel: { color: UI.text, fontSize: 12 },
      },
      tooltip: {
        ...tooltipBase(),
        trigger: 'item',
        formatter: (p: { dataIndex: number }) => {
          const r = rows[p.dataIndex];
          return tooltipNode(r[0], [[r[2], r[3], f.pct(r[1])]]);
        },
      },
      series: [
        {
          type: 'bar',
          barWidth: 18,
          // an unknown figure has no bar ('-' is ECharts' empty value), never a bar at 0
          data: rows.map((r) => ({
            value: f.isNumber(r[1]) ? +(r[1] * 100).toFixed(2) : '-',
            itemStyle: { color: r[2], borderRadius: [0, 3, 3, 0] },
          })),
          label: {
            show: true,
            position: 'right',
            color: UI.text,
            formatter: (p: { dataIndex: number }) => f.pct(rows[p.dataIndex][1]),
          },
          showBackground: true,
          backgroundStyle: { color: UI.bg, borderRadius: 3 },
        },
      ],
    }),
  );
  return el;
}

function busyVsFast(s: Summary): HTMLElement {
  const rows: BusyBar[] = [
    [f.label('gpu_busy_share'), s.gpu_busy_share, COLORS.busy, f.definition('gpu_busy_share')],
    [f.label('kernel_time_share'), s.kernel_time_share, COLORS.kernelShare, f.definition('kernel_time_share')],
    [f.label('sm_efficiency'), s.sm_efficiency, COLORS.smEff, f.definition('sm_efficiency')],
    [f.label('mfu'), s.mfu, COLORS.mfu, f.definition('mfu')],
  ];
  // The figures as the report has them, never a difference computed here: with MFU unknown,
  // how much of the busy time is useful is unknown too.
  const verdict = f.isNumber(s.mfu)
    ? [
        ' Here the GPU is busy ',
        fv('summary.gpu_busy_share', f.pct(s.gpu_busy_share)),
        ' of the step and MFU is ',
        fv('summary.mfu', f.pct(s.mfu)),
        '.',
      ]
    : ' MFU is unknown here, so how much of the busy time is useful is unknown.';
  const explain = h(
    'p',
    { class: 'explain' },
    'GPU busy counts time with any work on the GPU. SM efficiency discounts kernels that leave SMs empty. ',
    'MFU counts only useful model FLOPs against the peak.',
    h('strong', null, verdict),
  );
  return card('Busy is not fast', [busyChart(rows), explain], {
    help: 'A GPU can be busy 100 % of the time and still slow: few SMs filled, or work that is not useful FLOPs. Compare the four bars.',
    testid: 'busy-card',
  });
}

function deviceCard(w: WorkerReport, s: Summary): HTMLElement {
  const d = w.device;
  const rows: [string, Child][] = [
    ['GPU', d?.name ? `${d.name}${d.index !== null && d.index !== undefined ? ` (device ${d.index})` : ''}` : f.NA],
    [
      'SMs · compute',
      `${d?.num_sms ? `${d.num_sms} SMs` : `SMs ${f.NA}`} · ${d?.compute_capability ? `sm_${d.compute_capability.replace('.', '')}` : `compute capability ${f.NA}`}`,
    ],
    ['Peak used', peakInfo(w)?.long ?? f.NA],
    [f.label('kernels_per_step'), f.count(s.kernels_per_step, 0)],
    [f.label('sync_count_per_step'), f.figure('sync_count_per_step', s.sync_count_per_step)],
    [f.label('host_sync_blocked_share'), f.figure('host_sync_blocked_share', s.host_sync_blocked_share)],
    [
      'H2D / D2H per step',
      `${f.figure('h2d_bytes_per_step', s.h2d_bytes_per_step)} / ${f.figure('d2h_bytes_per_step', s.d2h_bytes_per_step)}`,
    ],
  ];
  if (w.distributed) {
    const dist = w.distributed;
    rows.push([
      'Distributed',
      `${dist.backend ?? `backend ${f.NA}`} · rank ${dist.rank ?? f.NA} of ${dist.world_size ?? f.NA}`,
    ]);
  }
  if (w.trace_bytes) rows.push(['Trace', `${f.bytes(w.trace_bytes)} decoded`]);
  return card(
    'Where a step goes',
    [
      stepBreakdownSummary(s),
      h(
        'dl',
        { class: 'facts', data: scope('summary device distributed trace_bytes') },
        rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
      ),
    ],
    {
      help: "The mean step (all analysed steps' time / steps), split into exclusive parts that add up to it: each share is time-weighted over the steps.",
      testid: 'device-card',
    },
  );
}

function notesCard(w: WorkerReport): HTMLElement {
  const notes = [...(w.notes ?? [])];
  // the headline's basis is decided in the analysis (mfu_status.basis): the note says what it is
  notes.push(
    w.summary?.mfu_status?.basis === 'without_profiler'
      ? "MFU is over the step without the profiler's host cost, an estimate: the profiler stretches CPU-bound steps. The MFU of the traced steps is the figure as recorded."
      : 'MFU from a trace is a lower bound: the profiler stretches CPU-bound steps. Achieved FLOP/s while busy is the matching upper view.',
  );
  return h(
    'div',
    { class: 'notes', testid: 'notes' },
    (w.flags ?? []).length
      ? h(
          'div',
          { class: 'flags' },
          (w.flags ?? []).map((fl) => h('span', { class: 'pill flag' }, fl)),
        )
      : null,
    h(
      'ul',
      null,
      notes.map((n) => h('li', null, icon(ICONS.info, 12), ' ', n)),
    ),
  );
}

/** One worker's Overview; ``job``: its run's one MFU where the run has several ranks (RankSummary.job);
 * ``waited``: why this rank's gains are of its own step, not the job's (RankRow.waited_note). */
export function renderWorker(w: WorkerReport, job: JobMfu | null = null, waited: string | null = null): HTMLElement {
  const s = w.summary;
  if (w.error || !s) {
    return banner('error', 'worker-error', `Cannot analyse ${w.name}${w.span ? ` (span ${w.span})` : ''}`, [
      h('div', { class: 'mono' }, w.error ?? 'no summary'),
      h('div', { class: 'dim mono' }, w.file),
    ]);
  }
  const findings = findingsCard(w);
  const timeline = timelineCard(w);
  linkFindings(findings, timeline);
  return h(
    'div',
    { class: 'overview', testid: 'overview' },
    kpis(w, s, job),
    waited ? banner('info', 'rank-waited', 'This rank waited for others', h('div', null, waited)) : null,
    h('div', { class: 'row two' }, busyVsFast(s), deviceCard(w, s)),
    h('div', { class: 'row two' }, findings, waterfallCard(w)),
    timeline?.el,
    stepsChart(w, s),
    criticalPathCard(w),
    whatIfCard(w),
    communicationCard(w),
    memoryCard(w),
    h('div', { class: 'row two' }, flopsCard(w), launchesCard(w), copiesCard(w), syncsCard(w)),
    rooflineCard(w),
    kernelsCard(w),
    notesCard(w),
  );
}
