// The Overview of one worker report (one device of one span of one run).
import { card } from './card';
import { chart, tooltipBase, tooltipNode } from './charts';
import { findingsCard, num, str, waterfallCard } from './diagnosis';
import { type Child, h, ICONS, icon } from './dom';
import * as f from './format';
import { COLORS, UI } from './palette';
import { rooflineCard } from './roofline';
import { table } from './table';
import type {
  CopyStats,
  Json,
  JsonObject,
  KernelStats,
  RankRow,
  RankSummary,
  Spread,
  Step,
  Summary,
  SyncStats,
  WorkerReport,
} from './types';

export const BREAKDOWN: { key: string; label: string; color: string; help: string }[] = [
  { key: 'kernel', label: 'Kernels', color: COLORS.kernel, help: 'GPU time with at least one kernel running' },
  { key: 'memcpy', label: 'Memcpy', color: COLORS.memcpy, help: 'GPU time copying, with no kernel running' },
  { key: 'memset', label: 'Memset', color: COLORS.memset, help: 'GPU time in memset only' },
  {
    key: 'sync_wait',
    label: 'Sync wait',
    color: COLORS.sync,
    help: 'GPU idle while the host blocks in a synchronising call',
  },
  {
    key: 'idle',
    label: 'Idle',
    color: COLORS.idle,
    help: 'GPU idle for other reasons (host-bound, data loading, launch gaps)',
  },
];

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

/** The mean step (Σ step time / steps): the step the time-weighted shares, the waterfall and MFU
 * apply to. Reports cached before the key existed fall back to the median. */
export function meanStep(s: Summary): number {
  return f.isNumber(s.step_time_mean_us) ? s.step_time_mean_us : s.step_time_us;
}

/** Why MFU is missing, in words. */
export function mfuReason(w: WorkerReport): string {
  const s = w.summary;
  const fl = w.flops ?? {};
  const given = str(fl.reason as Json) ?? str(fl.error as Json);
  if (given) return given;
  const impossible = fl.impossible as JsonObject | undefined;
  if (impossible && typeof impossible === 'object') {
    return `Impossible: above 100 %, so not shown. Likely cause: ${str(impossible.explanation as Json) ?? 'the peak, the FLOPs or the step'}`;
  }
  const parts: string[] = [];
  if (!s || !f.isNumber(s.flops_per_step)) {
    const notes = Array.isArray(fl.notes) ? (fl.notes as Json[]).map((n) => str(n) ?? '') : [];
    parts.push(
      notes.find((n) => /flop/i.test(n)) ??
        'no FLOP count: record with record_shapes=True, or give FLOPs per step (tb_mfu.json sidecar)',
    );
  }
  if (!w.device || !f.isNumber(w.device.peak_flops)) {
    const peak = fl.peak as JsonObject | undefined;
    parts.push(
      str(peak?.source as Json) ??
        `no peak FLOP/s known for ${w.device?.name ?? 'this device'} (set --mfu_peak_tflops)`,
    );
  }
  return parts.join('; ') || 'not computed';
}

function peakInfo(w: WorkerReport): { short: string; long: string } | null {
  const d = w.device;
  if (!d || !f.isNumber(d.peak_flops)) return null;
  const peak = (w.flops?.peak ?? null) as JsonObject | null;
  const name = peak ? str(peak.name as Json) : null;
  const inferred = peak?.inferred === true;
  const bits = [`peak ${f.tflops(d.peak_flops)}`];
  const dtypeSource = peak ? str(peak.dtype_source as Json) : null;
  if (d.dtype)
    bits.push(
      dtypeSource && dtypeSource !== 'shapes'
        ? `${d.dtype} (${dtypeSource === 'assumed' ? 'assumed, PaLM convention' : `from ${dtypeSource}`})`
        : d.dtype,
    );
  if (name) bits.push(name + (inferred ? ' (inferred)' : ''));
  return { short: bits.join(' · '), long: d.peak_source ?? bits.join(' · ') };
}

function kpis(w: WorkerReport, s: Summary): HTMLElement {
  const fl = w.flops ?? {};
  const mfu = f.isNumber(s.mfu) ? s.mfu : null;
  const hasMfu = mfu !== null;
  const impossible = !hasMfu && (w.flags ?? []).includes('impossible_mfu');
  const peakFlops = w.device?.peak_flops;
  // The same figure as MFU, in FLOP/s: all FLOPs of the steps over all their time.
  const achieved = impossible
    ? null
    : mfu !== null && f.isNumber(peakFlops)
      ? mfu * peakFlops
      : f.isNumber(s.flops_per_step) && meanStep(s) > 0
        ? s.flops_per_step / (meanStep(s) / 1e6)
        : null;
  const busyT = num(fl.achieved_tflops_while_busy as Json);
  const whileBusy = impossible
    ? null
    : busyT !== null
      ? busyT * 1e12
      : achieved !== null && s.gpu_busy_share > 0
        ? achieved / s.gpu_busy_share
        : null;
  const src = str(fl.headline_source as Json) ?? str(fl.source as Json);
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
  return h(
    'div',
    { class: 'kpis' },
    kpi('MFU', hasMfu ? f.pct(s.mfu) : impossible ? 'impossible' : f.NA, mfuSub, {
      testid: 'mfu-value',
      raw: mfu,
      cls: `kpi-main ${hasMfu ? '' : 'kpi-na'}`,
      title:
        'Model FLOPs utilisation: FLOPs of the analysed steps / (their time × peak FLOP/s). A lower bound: the profiler stretches CPU-bound steps.',
    }),
    kpi(
      'Achieved',
      achieved !== null ? f.tflops(achieved) : impossible ? 'impossible' : f.NA,
      whileBusy !== null
        ? `${f.tflops(whileBusy)} while GPU busy`
        : impossible
          ? 'above the peak: see MFU'
          : 'needs a FLOP count',
      {
        title: 'FLOP/s over the whole step, and over the time the GPU was busy (the matching upper view).',
      },
    ),
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

function busyVsFast(s: Summary): HTMLElement {
  const rows: [string, number | null | undefined, string, string][] = [
    ['GPU busy', s.gpu_busy_share, COLORS.busy, 'any kernel, copy or memset running'],
    ['Kernel time', s.kernel_time_share, COLORS.kernelShare, 'any kernel running'],
    ['SM efficiency', s.sm_efficiency, COLORS.smEff, 'SMs actually filled by those kernels'],
    ['MFU', s.mfu, COLORS.mfu, 'useful FLOPs against the peak'],
  ];
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
          data: rows.map((r) => ({
            value: f.isNumber(r[1]) ? +(r[1] * 100).toFixed(2) : 0,
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
  const gap = f.isNumber(s.mfu)
    ? s.gpu_busy_share - s.mfu
    : f.isNumber(s.sm_efficiency)
      ? s.gpu_busy_share - s.sm_efficiency
      : null;
  const explain = h(
    'p',
    { class: 'explain' },
    'GPU busy counts time with any work on the GPU. SM efficiency discounts kernels that leave SMs empty. ',
    'MFU counts only useful model FLOPs against the peak.',
    gap !== null && gap > 0.2 ? h('strong', null, ` Here ${f.pct(gap, 0)} of the step is busy but not useful.`) : null,
  );
  return card('Busy is not fast', [el, explain], {
    help: 'A GPU can be busy 100 % of the time and still slow: few SMs filled, or work that is not useful FLOPs. Compare the four bars.',
    testid: 'busy-card',
  });
}

function stepBreakdownSummary(s: Summary): HTMLElement {
  const b = s.breakdown ?? {};
  const bar = h('div', { class: 'stackbar' });
  const legend = h('div', { class: 'stack-legend' });
  for (const c of BREAKDOWN) {
    const v = b[c.key] ?? 0;
    if (v > 0)
      bar.append(
        h('div', {
          class: 'seg',
          style: { width: `${(v * 100).toFixed(3)}%`, background: c.color },
          title: `${c.label}: ${f.pct(v)} · ${f.ms(v * meanStep(s))}`,
        }),
      );
    legend.append(
      h(
        'div',
        { class: 'leg', title: c.help },
        h('span', { class: 'dot', style: { background: c.color } }),
        h('span', { class: 'leg-label' }, c.label),
        h('span', { class: 'leg-val' }, f.pct(v)),
        h('span', { class: 'leg-ms' }, f.ms(v * meanStep(s))),
      ),
    );
  }
  return h('div', { class: 'breakdown' }, bar, legend);
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
    rows.push([
      'Distributed',
      `${str(dist.backend as Json) ?? '?'} · rank ${str(dist.rank as Json) ?? '?'} of ${str(dist.world_size as Json) ?? '?'}`,
    ]);
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

function stepsChart(w: WorkerReport, summary: Summary): HTMLElement {
  const steps = w.steps ?? [];
  const el = h('div', { class: 'chart', testid: 'steps-chart' });
  if (!steps.length) return card('Per-step breakdown', h('p', { class: 'muted' }, 'No complete steps.'));
  const part = (s: Step, key: string) => ((s.breakdown?.[key] ?? 0) * s.dur_us) / 1000;
  queueMicrotask(() =>
    chart(el, {
      color: BREAKDOWN.map((b) => b.color),
      grid: { left: 64, right: 16, top: 36, bottom: 36 },
      legend: { top: 0, icon: 'roundRect', itemWidth: 12, itemHeight: 10, textStyle: { color: UI.text } },
      xAxis: {
        type: 'category',
        data: steps.map((s) => `#${s.step}`),
        name: 'step',
        nameLocation: 'middle',
        nameGap: 24,
        axisLabel: { color: UI.dim },
      },
      yAxis: {
        type: 'value',
        name: 'ms',
        nameTextStyle: { color: UI.dim },
        axisLabel: { color: UI.dim },
        splitLine: { lineStyle: { color: UI.lineSoft } },
      },
      tooltip: {
        ...tooltipBase,
        trigger: 'axis',
        axisPointer: { type: 'shadow' },
        formatter: (ps: { dataIndex: number }[]) => {
          const s = steps[ps[0].dataIndex];
          return tooltipNode(
            `Step ${s.step} · ${f.ms(s.dur_us)}`,
            BREAKDOWN.map((b) => [b.color, b.label, `${f.ms(part(s, b.key) * 1000)} · ${f.pct(s.breakdown?.[b.key])}`]),
            `MFU ${f.pct(s.mfu)} · SM eff. ${f.pct(s.sm_efficiency)}`,
          );
        },
      },
      series: BREAKDOWN.map((b) => ({
        name: b.label,
        type: 'bar',
        stack: 'step',
        barMaxWidth: 56,
        emphasis: { focus: 'series' },
        data: steps.map((s) => +part(s, b.key).toFixed(3)),
      })),
    }),
  );
  return card('Per-step breakdown', [el, spreadBlock(summary)], {
    help: 'Each profiled step split into exclusive parts: kernels, copies without kernels, memset only, GPU idle while the host waits in a sync, other idle. Below, how the step time and the main shares vary from step to step.',
    testid: 'steps-card',
  });
}

const SPREAD_ROWS: [string, string, (x: number) => string][] = [
  ['step_time_us', 'Step time', (x) => f.ms(x)],
  ['gpu_busy_share', 'GPU busy', (x) => f.pct(x)],
  ['kernel_time_share', 'Kernel time', (x) => f.pct(x)],
  ['sm_efficiency', 'SM efficiency', (x) => f.pct(x)],
  ['idle_share', 'Idle', (x) => f.pct(x)],
  ['tensor_core_kernel_share', 'Tensor-core kernels', (x) => f.pct(x)],
  ['mfu', 'MFU', (x) => f.pct(x)],
];

/** The per-step spread of the step time and the main shares (summary.distribution). */
function spreadBlock(s: Summary): HTMLElement | null {
  const d = s.distribution ?? {};
  const rows = SPREAD_ROWS.filter(([key]) => d[key]);
  if (!rows.length) return null;
  const range = (fmt: (x: number) => string, a: number, b: number) => (a === b ? fmt(a) : `${fmt(a)} – ${fmt(b)}`);
  return h(
    'table',
    {
      class: 'grid compact spread',
      testid: 'step-spread',
      title: 'Over the analysed steps: p10/p90 interpolate linearly between the sorted per-step values.',
    },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', null, 'Per step'),
        h('th', { class: 'num' }, 'Median'),
        h('th', { class: 'num' }, 'p10 – p90'),
        h('th', { class: 'num' }, 'Min – max'),
      ),
    ),
    h(
      'tbody',
      null,
      rows.map(([key, label, fmt]) => {
        const sp: Spread = d[key];
        return h(
          'tr',
          { data: { key } },
          h('th', null, label),
          h('td', { class: 'num' }, fmt(sp.median)),
          h('td', { class: 'num' }, range(fmt, sp.p10, sp.p90)),
          h('td', { class: 'num' }, range(fmt, sp.min, sp.max)),
        );
      }),
    ),
  );
}

function copiesCard(w: WorkerReport): HTMLElement {
  const copies = w.copies ?? [];
  return card(
    'Copies',
    table<CopyStats>(
      copies,
      [
        {
          key: 'direction',
          label: 'Direction',
          value: (c) => c.direction,
          cell: (c) => h('span', { class: `pill dir-${c.direction.toLowerCase()}` }, c.direction),
        },
        {
          key: 'memory',
          label: 'Host memory',
          value: (c) => c.memory,
          title: 'The host side of the copy: pageable copies are slower and synchronous',
        },
        {
          key: 'count',
          label: 'Count / step',
          num: true,
          value: (c) => c.count_per_step,
          cell: (c) => f.count(c.count_per_step),
        },
        {
          key: 'bytes',
          label: 'Bytes / step',
          num: true,
          value: (c) => c.bytes_per_step,
          cell: (c) => f.bytes(c.bytes_per_step),
        },
        {
          key: 'time',
          label: 'Time / step',
          num: true,
          value: (c) => c.time_us_per_step,
          cell: (c) => f.dur(c.time_us_per_step),
        },
        {
          key: 'gbps',
          label: 'Bandwidth',
          num: true,
          value: (c) => c.gbps,
          cell: (c) => f.gbps(c.gbps),
          title: 'Achieved while copying, GB/s (1e9 bytes/s)',
        },
        {
          key: 'small',
          label: '< 64 KiB',
          num: true,
          value: (c) => c.small_count_per_step,
          cell: (c) => f.count(c.small_count_per_step),
          title: 'Small copies per step (latency-bound)',
        },
      ],
      { testid: 'copies-table', sortKey: 'time', empty: 'No copies in the profiled steps.' },
    ),
    { help: 'Memcpy by direction and host memory kind, per step.' },
  );
}

function syncsCard(w: WorkerReport): HTMLElement {
  const syncs = w.syncs ?? [];
  return card(
    'Sync points',
    table<SyncStats>(
      syncs,
      [
        {
          key: 'root',
          label: 'Caused by',
          value: (s) => s.root_op ?? s.op ?? '',
          cell: (s) => h('span', { class: 'mono' }, s.root_op ?? s.op ?? '—'),
          title: 'The outermost op in the step around the synchronising call',
        },
        {
          key: 'op',
          label: 'Inner op',
          value: (s) => s.op ?? '',
          cell: (s) => h('span', { class: 'mono dim' }, s.op ?? '—'),
        },
        { key: 'api', label: 'API', value: (s) => s.api, cell: (s) => h('span', { class: 'mono' }, s.api) },
        {
          key: 'count',
          label: 'Count / step',
          num: true,
          value: (s) => s.count_per_step,
          cell: (s) => f.count(s.count_per_step),
        },
        {
          key: 'blocked',
          label: 'Blocked / step',
          num: true,
          value: (s) => s.blocked_us_per_step,
          cell: (s) => f.dur(s.blocked_us_per_step),
          title: 'Host time blocked in the call, per step',
        },
      ],
      { testid: 'syncs-table', sortKey: 'blocked', empty: 'No host-device synchronisation in the profiled steps.' },
    ),
    { help: 'Calls where the host waits for the GPU, grouped by the op that issued them.' },
  );
}

function launchesCard(w: WorkerReport): HTMLElement {
  const l = w.launches;
  if (!l) return card('Launches', h('p', { class: 'muted' }, 'No launch statistics.'));
  const rows: [string, string, string][] = [
    ['Kernels / step', f.count(l.kernels_per_step, 0), 'Kernels that started inside the profiled steps'],
    ['Median kernel', f.dur(l.median_kernel_us), 'Median kernel duration'],
    ['Short kernels', f.pct(l.short_kernel_share), 'Share of kernels under 10 µs: launch-bound if many'],
    [
      'Launch API / step',
      f.dur(l.launch_api_us_per_step),
      'Host time in launch calls (cudaLaunchKernel, cuLaunchKernel, …)',
    ],
    ['Idle gaps / step', f.count(l.idle_gaps.count_per_step, 0), 'Gaps between GPU activities'],
    ['Idle in gaps / step', f.dur(l.idle_gaps.total_us_per_step), 'Total GPU idle time in those gaps'],
    ['Median · max gap', `${f.dur(l.idle_gaps.median_us)} · ${f.dur(l.idle_gaps.max_us)}`, ''],
  ];
  const replays = l.graph_launches_per_step ?? 0;
  if (replays > 0) {
    const inGraphs = l.graph_kernels_per_step ?? 0;
    rows.push(
      [
        'CUDA graph replays / step',
        f.count(replays, 1),
        'cudaGraphLaunch / hipGraphLaunch calls: one launch replays a whole captured graph',
      ],
      [
        'Kernels in graphs / step',
        `${f.count(inGraphs, 0)} (median ${f.dur(l.graph_median_kernel_us)})`,
        'Kernels the graph replays ran; the host did not launch them one by one',
      ],
      [
        'Launched one by one / step',
        f.count(l.kernels_per_step - inGraphs, 0),
        'Kernels the host launched itself, outside graph replays',
      ],
    );
  }
  const help =
    replays > 0
      ? 'This run replays CUDA graphs: the gaps between their kernels are not host launch overhead. Fewer, fused kernels (torch.compile) are the lever there; kernels launched one by one can still be launch-bound.'
      : 'Many short kernels with gaps between them mean the host cannot feed the GPU: consider CUDA graphs or torch.compile.';
  return card(
    'Launches',
    h(
      'dl',
      { class: 'facts', testid: 'launch-stats' },
      rows.map(([k, v, t]) => [h('dt', { title: t }, k), h('dd', null, v)]),
    ),
    {
      help,
    },
  );
}

function kernelsCard(w: WorkerReport): HTMLElement {
  const ks = w.top_kernels ?? [];
  const maxShare = Math.max(1e-9, ...ks.map((k) => k.share));
  return card(
    `Top kernels`,
    table<KernelStats>(
      ks,
      [
        {
          key: 'name',
          label: 'Kernel',
          value: (k) => k.name,
          cell: (k) => h('span', { class: 'kname mono', title: k.name }, k.name),
          cls: 'kcell',
        },
        { key: 'count', label: 'Calls', num: true, value: (k) => k.count, cell: (k) => f.count(k.count) },
        {
          key: 'total',
          label: 'Total',
          num: true,
          value: (k) => k.total_us,
          cell: (k) => f.dur(k.total_us),
          title: 'Total time in the analysed steps',
        },
        {
          key: 'share',
          label: 'Share',
          num: true,
          value: (k) => k.share,
          cell: (k) => shareCell(k.share, maxShare),
          title: 'Share of all kernel time',
        },
        { key: 'mean', label: 'Mean', num: true, value: (k) => k.mean_us, cell: (k) => f.dur(k.mean_us) },
        {
          key: 'bps',
          label: 'Blocks / SM',
          num: true,
          value: (k) => k.mean_blocks_per_sm,
          cell: (k) => f.count(k.mean_blocks_per_sm, 2),
          title: 'Mean blocks per SM: under 1 leaves SMs empty',
        },
        { key: 'sm', label: 'SM eff.', num: true, value: (k) => k.sm_efficiency, cell: (k) => f.pct(k.sm_efficiency) },
        {
          key: 'occ',
          label: 'Occupancy',
          num: true,
          value: (k) => k.achieved_occupancy,
          cell: (k) => f.pct(k.achieved_occupancy),
          title: 'Estimated achieved occupancy; n/a where the profiler could not estimate it (e.g. Hopper nvjet GEMMs)',
        },
        {
          key: 'tc',
          label: 'Unit',
          value: (k) => k.core ?? (k.tensor_core ? 'tensor-core' : ''),
          cell: (k) => unitCell(k),
        },
      ],
      {
        testid: 'kernels-table',
        sortKey: 'total',
        maxRows: 15,
        filter: (k, q) => k.name.toLowerCase().includes(q),
        filterPlaceholder: 'Filter kernels by name',
        empty: 'No kernels.',
      },
    ),
    { help: 'Kernels by total time in the analysed steps. Click a column to sort.', cls: 'wide' },
  );
}

const UNIT_LABEL: Record<string, string> = {
  'tensor-core': 'tensor core',
  'cuda-core': 'CUDA core',
  unknown: 'unknown',
};

/** Which unit a kernel's math runs on (the family table), with the dtype its name gives. */
function unitCell(k: KernelStats): HTMLElement {
  const core = k.core ?? (k.tensor_core ? 'tensor-core' : 'not-a-matmul');
  const label = UNIT_LABEL[core];
  if (!label) return h('span', { class: 'dim' }, '—');
  const text = k.dtype ? `${label} · ${k.dtype}` : label;
  if (core === 'tensor-core') return h('span', { class: 'yes' }, icon(ICONS.check, 12), text);
  return h(
    'span',
    {
      class: core === 'unknown' ? 'dim' : '',
      title: core === 'unknown' ? 'A GEMM-like kernel no family of the table names: its unit is not known' : '',
    },
    text,
  );
}

function shareCell(x: number, max: number): HTMLElement {
  return h(
    'span',
    { class: 'sharecell' },
    h('span', { class: 'sharebar', style: { width: `${Math.min(100, (x / max) * 100).toFixed(1)}%` } }),
    h('span', { class: 'shareval' }, f.pct(x)),
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

function flopsCard(w: WorkerReport): HTMLElement | null {
  const fl = w.flops;
  if (!fl) return null;
  const rows: [string, Child, string?][] = [];
  const head = str(fl.headline_source as Json);
  const src = str(fl.source as Json);
  const conv = str(fl.convention as Json);
  if (head) rows.push(['Source', head, 'Where the FLOP count behind MFU comes from']);
  else if (src) rows.push(['Source', conv ? `${src} (${conv} convention)` : src, 'Where the FLOP count comes from']);
  const per = num(fl.flops_per_step as Json) ?? w.summary?.flops_per_step ?? null;
  rows.push(['FLOPs / step', f.flops(per)]);
  const model = num(fl.model_flops_per_step as Json);
  if (model !== null && per !== null && Math.abs(model - per) > 1e-6 * Math.max(1, per)) {
    rows.push([
      'Model FLOPs / step',
      f.flops(model),
      'Without recomputation (activation checkpointing, attention backward)',
    ]);
  }
  const shares = fl.dtype_shares;
  if (shares && typeof shares === 'object' && !Array.isArray(shares)) {
    const parts = Object.entries(shares)
      .filter(([, v]) => typeof v === 'number')
      .sort((a, b) => (b[1] as number) - (a[1] as number))
      .map(([k, v]) => `${k} ${f.pct(v as number)}`);
    if (parts.length) rows.push(['Precision mix', parts.join(' · '), 'Share of counted FLOPs by compute dtype']);
  } else {
    const dtype = str(fl.dtype as Json);
    if (dtype) rows.push(['Precision', dtype]);
  }
  const kshares = fl.kernel_dtype_shares;
  if (kshares && typeof kshares === 'object' && !Array.isArray(kshares)) {
    const parts = Object.entries(kshares)
      .filter(([, v]) => typeof v === 'number')
      .map(([k, v]) => `${k} ${f.pct(v as number)}`);
    if (parts.length)
      rows.push([
        'Kernel dtypes',
        parts.join(' · '),
        'Matmul kernel time by the dtype their names give (kernel-name tokens)',
      ]);
  }
  const peakFacts = fl.peak as JsonObject | undefined;
  if (peakFacts && typeof peakFacts === 'object' && str(peakFacts.dtype as Json)) {
    rows.push([
      'Peak dtype',
      `${str(peakFacts.dtype as Json)} from ${str(peakFacts.dtype_source as Json) ?? 'shapes'}`,
      'Shapes, else kernel-name tokens, else the dense bf16 peak (PaLM convention)',
    ]);
  }
  const hfu = num(fl.hfu as Json);
  const mfuModel = num(fl.mfu_model as Json);
  const mfuUser = num(fl.mfu_user as Json);
  const user = num(fl.user_flops_per_step as Json);
  if (hfu !== null)
    rows.push(['HFU (all counted FLOPs)', f.pct(hfu), 'Hardware FLOPs utilisation: includes recomputed work']);
  if (mfuModel !== null && hfu !== null && Math.abs(mfuModel - hfu) > 1e-9)
    rows.push(['MFU without recompute', f.pct(mfuModel)]);
  if (user !== null)
    rows.push([
      'User FLOPs / step',
      `${f.flops(user)}${str(fl.user_flops_source as Json) ? ` · ${str(fl.user_flops_source as Json)}` : ''}`,
      'From --flops-per-step or the tb_mfu.json sidecar',
    ]);
  if (mfuUser !== null) rows.push(['MFU (user FLOPs)', f.pct(mfuUser)]);
  const approx = num(fl.approximate_share as Json);
  if (approx !== null)
    rows.push([
      'Approximate',
      `${f.pct(approx)} of FLOPs`,
      'Counted with approximate formulas (shapes partly unknown)',
    ]);
  const un = num(fl.unattributed_kernel_share as Json);
  if (un !== null)
    rows.push(['Kernel time not counted', f.pct(un), 'Kernel time launched by ops without a FLOP formula']);
  const byOp = Array.isArray(fl.by_op) ? (fl.by_op as JsonObject[]).filter((o) => o && typeof o === 'object') : [];
  const unTop = Array.isArray(fl.unattributed_top)
    ? (fl.unattributed_top as JsonObject[]).filter((o) => o && typeof o === 'object')
    : [];
  const notes = Array.isArray(fl.notes) ? (fl.notes as Json[]).map((n) => str(n) ?? '') : [];
  const maxShare = Math.max(1e-9, ...byOp.map((o) => num(o.flops_share) ?? 0));
  return card(
    'FLOPs counted',
    [
      h(
        'dl',
        { class: 'facts', testid: 'flops-facts' },
        rows.map(([k, v, t]) => [h('dt', { title: t ?? '' }, k), h('dd', null, v)]),
      ),
      byOp.length
        ? h(
            'table',
            { class: 'grid compact' },
            h('thead', null, h('tr', null, h('th', null, 'Op'), h('th', { class: 'num' }, 'FLOPs share'))),
            h(
              'tbody',
              null,
              byOp.map((o) =>
                h(
                  'tr',
                  null,
                  h('td', { class: 'mono' }, str(o.op) ?? '?'),
                  h('td', { class: 'num' }, shareCell(num(o.flops_share) ?? 0, maxShare)),
                ),
              ),
            ),
          )
        : null,
      unTop.length
        ? h(
            'details',
            null,
            h('summary', null, `Ops whose kernels were not counted (${unTop.length})`),
            h(
              'ul',
              { class: 'plain' },
              unTop.map((o) =>
                h(
                  'li',
                  null,
                  h('span', { class: 'mono' }, str(o.op) ?? '?'),
                  ` — ${f.dur(num(o.kernel_us))} of kernels`,
                ),
              ),
            ),
          )
        : null,
      notes.length
        ? h(
            'ul',
            { class: 'plain dim' },
            notes.map((n) => h('li', null, n)),
          )
        : null,
    ],
    { testid: 'flops-card', help: 'How the useful FLOPs behind MFU were counted, from the recorded op shapes.' },
  );
}

/** A distributed run's ranks side by side, with the straggler the others wait for. */
export function ranksCard(r: RankSummary): HTMLElement {
  const straggler = r.straggler
    ? h(
        'div',
        { class: 'banner warn', testid: 'straggler' },
        icon(ICONS.warn, 16),
        h('div', null, h('strong', null, `Straggler: ${r.straggler.worker}`), h('div', null, r.straggler.reason)),
      )
    : null;
  return card(
    `Ranks side by side${r.world_size ? ` (world size ${r.world_size})` : ''}`,
    [
      straggler,
      table<RankRow>(
        r.ranks,
        [
          { key: 'rank', label: 'Rank', num: true, value: (x) => x.rank, cell: (x) => f.count(x.rank, 0) },
          {
            key: 'worker',
            label: 'Worker',
            value: (x) => x.worker,
            cell: (x) => h('span', { class: 'mono' }, x.worker),
          },
          {
            key: 'step',
            label: 'Median step',
            num: true,
            value: (x) => x.step_time_us,
            cell: (x) => f.dur(x.step_time_us),
            title: 'Median step time of the rank',
          },
          {
            key: 'busy',
            label: 'GPU busy',
            num: true,
            value: (x) => x.gpu_busy_share,
            cell: (x) => f.pct(x.gpu_busy_share),
          },
          { key: 'idle', label: 'Idle', num: true, value: (x) => x.idle_share, cell: (x) => f.pct(x.idle_share) },
          {
            key: 'comm',
            label: 'Exposed comm / step',
            num: true,
            value: (x) => x.exposed_communication_us_per_step,
            cell: (x) => f.dur(x.exposed_communication_us_per_step),
            title: 'Collective kernels running with no compute alongside, which includes waiting for the slowest rank',
          },
          { key: 'mfu', label: 'MFU', num: true, value: (x) => x.mfu, cell: (x) => f.pct(x.mfu) },
        ],
        { testid: 'ranks-table', sortKey: 'rank', sortDesc: false },
      ),
    ],
    {
      help: 'Every rank of this run. A collective runs until all ranks join it, so the ranks that wait show it as exposed communication; the rank with the least is the one they wait for.',
      cls: 'wide',
    },
  );
}

export function renderWorker(w: WorkerReport): HTMLElement {
  const s = w.summary;
  if (w.error || !s) {
    return h(
      'div',
      { class: 'banner error', testid: 'worker-error' },
      icon(ICONS.error, 16),
      h(
        'div',
        null,
        h('strong', null, `Cannot analyse ${w.name}${w.span ? ` (span ${w.span})` : ''}`),
        h('div', { class: 'mono' }, w.error ?? 'no summary'),
        h('div', { class: 'dim mono' }, w.file),
      ),
    );
  }
  return h(
    'div',
    { class: 'overview', testid: 'overview' },
    kpis(w, s),
    h('div', { class: 'row two' }, busyVsFast(s), deviceCard(w, s)),
    h('div', { class: 'row two' }, findingsCard(w), waterfallCard(w)),
    stepsChart(w, s),
    h('div', { class: 'row two' }, flopsCard(w), launchesCard(w), copiesCard(w), syncsCard(w)),
    rooflineCard(w),
    kernelsCard(w),
    notesCard(w),
  );
}
