// The Overview of one worker report (one device of one span of one run): the headline
// figures, then the cards of the other modules in their order on the page.
import { copiesCard, kernelsCard, launchesCard, syncsCard } from './activity';
import { banner, card } from './card';
import { chart, tooltipBase, tooltipNode } from './charts';
import { communicationCard } from './communication';
import { findingsCard } from './diagnosis';
import { type Child, h, ICONS, icon } from './dom';
import { flopsCard, mfuReason, peakInfo } from './flops';
import * as f from './format';
import { COLORS, UI } from './palette';
import { rooflineCard } from './roofline';
import { meanStep, stepBreakdownSummary, stepsChart } from './steps';
import type { Summary, WorkerReport } from './types';
import { waterfallCard } from './waterfall';

/** "346.3 TFLOP/s" -> number, then the unit in a smaller span (the text stays "346.3 TFLOP/s"). */
function valueWithUnit(value: string): Child[] {
  const m = /^(.*\d)( [^\d\s]+)$/.exec(value);
  return m ? [m[1], h('span', { class: 'unit' }, m[2])] : [value];
}

function kpi(
  label: string,
  value: string,
  sub: Child,
  opts: { testid?: string; raw?: number | null; cls?: string; title?: string } = {},
): HTMLElement {
  return h(
    'div',
    { class: `kpi ${opts.cls ?? ''}`, title: opts.title },
    h('div', { class: 'kpi-label' }, label),
    h(
      'div',
      {
        class: 'kpi-value',
        testid: opts.testid,
        data: opts.raw === undefined ? undefined : { value: opts.raw === null ? '' : String(opts.raw) },
      },
      ...valueWithUnit(value),
    ),
    h('div', { class: 'kpi-sub' }, sub),
  );
}

/** The MFU, or why there is none, over the FLOPs per step and the peak it was measured against. */
function mfuKpi(w: WorkerReport, s: Summary, impossible: boolean): HTMLElement {
  const fl = w.flops;
  const mfu = f.isNumber(s.mfu) ? s.mfu : null;
  const hasMfu = mfu !== null;
  const src = fl?.headline_source ?? fl?.source ?? null;
  const peak = peakInfo(w);
  const mfuSub = hasMfu
    ? [
        h('div', null, `${f.flops(s.flops_per_step)} per step${src ? ` · ${src}` : ''}`),
        peak ? h('div', { title: peak.long }, peak.short) : null,
      ]
    : [
        h('div', { class: 'reason', testid: 'mfu-reason' }, mfuReason(w)),
        peak ? h('div', { title: peak.long }, peak.short) : null,
      ];
  return kpi('MFU', hasMfu ? f.pct(s.mfu) : impossible ? 'impossible' : f.NA, mfuSub, {
    testid: 'mfu-value',
    raw: mfu,
    cls: `kpi-main ${hasMfu ? '' : 'kpi-na'}`,
    title:
      'Model FLOPs utilisation: FLOPs of the analysed steps / (their time × peak FLOP/s). A lower bound: the profiler stretches CPU-bound steps.',
  });
}

/** The achieved FLOP/s over the step, and while the GPU was busy (both from the report). */
function achievedKpi(w: WorkerReport, s: Summary, impossible: boolean): HTMLElement {
  const achieved = s.achieved_flops ?? null;
  const busyT = w.flops?.achieved_tflops_while_busy ?? null;
  return kpi(
    'Achieved',
    achieved !== null ? f.tflops(achieved) : impossible ? 'impossible' : f.NA,
    busyT !== null
      ? `${f.tflops(busyT * 1e12)} while GPU busy`
      : impossible
        ? 'above the peak: see MFU'
        : 'needs a FLOP count from the shapes',
    {
      title: 'FLOP/s over the whole step, and over the time the GPU was busy (the matching upper view).',
    },
  );
}

function kpis(w: WorkerReport, s: Summary): HTMLElement {
  const impossible = !f.isNumber(s.mfu) && (w.flags ?? []).includes('impossible_mfu');
  return h(
    'div',
    { class: 'kpis' },
    mfuKpi(w, s, impossible),
    achievedKpi(w, s, impossible),
    kpi(
      'Median step time',
      f.ms(s.step_time_us),
      `of ${s.steps} step${s.steps === 1 ? '' : 's'} · mean ${f.ms(meanStep(s))}`,
      {
        testid: 'step-time',
        title:
          'The median step duration. The shares on this page are time-weighted over all analysed steps (their sum of time), like MFU and the PyTorch Profiler tab; the mean step is the one they add up to.',
      },
    ),
    kpi('GPU busy', f.pct(s.gpu_busy_share), `kernels ${f.pct(s.kernel_time_share)}`, {
      title:
        "Share of the analysed steps' time with any kernel, copy or memset running on this GPU (time-weighted over the steps). Kernel time is the PyTorch Profiler tab's GPU Utilization.",
    }),
    kpi('SM efficiency', f.pct(s.sm_efficiency), `occupancy ${f.pct(s.achieved_occupancy)}`, {
      title:
        "Time-weighted share of SMs with work (blocks per SM capped at 1), over the analysed steps: the PyTorch Profiler tab's Est. SM Efficiency. Occupancy is weighted by kernel time.",
    }),
    kpi(
      'Tensor cores',
      f.pct(s.tensor_core_kernel_share),
      `of kernel time · unknown ${f.pct(s.unknown_core_kernel_share ?? 0)}`,
      {
        testid: 'tensor-core-kpi',
        title:
          'Share of kernel time in tensor-core kernels, by the kernel-name family table. "Unknown": GEMM-like kernels no family names (not counted as CUDA-core).',
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
        ...tooltipBase,
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
    ['GPU busy', s.gpu_busy_share, COLORS.busy, 'any kernel, copy or memset running'],
    ['Kernel time', s.kernel_time_share, COLORS.kernelShare, 'any kernel running'],
    ['SM efficiency', s.sm_efficiency, COLORS.smEff, 'SMs actually filled by those kernels'],
    ['MFU', s.mfu, COLORS.mfu, 'useful FLOPs against the peak'],
  ];
  // The figures as the report has them, never a difference computed here: with MFU unknown,
  // how much of the busy time is useful is unknown too.
  const verdict = f.isNumber(s.mfu)
    ? ` Here the GPU is busy ${f.pct(s.gpu_busy_share)} of the step and MFU is ${f.pct(s.mfu)}.`
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
    [
      'GPU',
      d
        ? `${d.name ?? 'unknown'}${d.index !== null && d.index !== undefined ? ` (device ${d.index})` : ''}`
        : 'unknown',
    ],
    ['SMs · compute', d ? `${d.num_sms ?? '?'} SMs · sm_${(d.compute_capability ?? '?').replace('.', '')}` : f.NA],
    ['Peak used', peakInfo(w)?.long ?? 'none known'],
    ['Kernels / step', `${f.count(s.kernels_per_step, 0)}`],
    ['Syncs / step', f.count(s.sync_count_per_step)],
    ['H2D / D2H per step', `${f.bytes(s.h2d_bytes_per_step)} / ${f.bytes(s.d2h_bytes_per_step)}`],
  ];
  if (w.distributed) {
    const dist = w.distributed;
    rows.push(['Distributed', `${dist.backend ?? '?'} · rank ${dist.rank ?? '?'} of ${dist.world_size ?? '?'}`]);
  }
  if (w.trace_bytes) rows.push(['Trace', `${f.bytes(w.trace_bytes)} decoded`]);
  return card(
    'Where a step goes',
    [
      stepBreakdownSummary(s),
      h(
        'dl',
        { class: 'facts' },
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
  notes.push(
    'MFU from a trace is a lower bound: the profiler stretches CPU-bound steps. Achieved FLOP/s while busy is the matching upper view.',
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

export function renderWorker(w: WorkerReport): HTMLElement {
  const s = w.summary;
  if (w.error || !s) {
    return banner('error', 'worker-error', `Cannot analyse ${w.name}${w.span ? ` (span ${w.span})` : ''}`, [
      h('div', { class: 'mono' }, w.error ?? 'no summary'),
      h('div', { class: 'dim mono' }, w.file),
    ]);
  }
  return h(
    'div',
    { class: 'overview', testid: 'overview' },
    kpis(w, s),
    h('div', { class: 'row two' }, busyVsFast(s), deviceCard(w, s)),
    h('div', { class: 'row two' }, findingsCard(w), waterfallCard(w)),
    stepsChart(w, s),
    communicationCard(w),
    h('div', { class: 'row two' }, flopsCard(w), launchesCard(w), copiesCard(w), syncsCard(w)),
    rooflineCard(w),
    kernelsCard(w),
    notesCard(w),
  );
}
