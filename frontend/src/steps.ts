// The step and where its time goes: the exclusive parts (kernel, memcpy, memset, sync wait,
// idle) as a bar, per step as a chart, and how the step time and shares vary over the steps.
import { card } from './card';
import { axisTooltip, chart, tooltipNode, valueAxisStyle } from './charts';
import { h } from './dom';
import * as f from './format';
import { COLORS, UI } from './palette';
import { plainHead } from './table';
import type { Spread, Step, Summary, WorkerReport } from './types';

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

/** The mean step (Σ step time / steps): the step the time-weighted shares, the waterfall and MFU
 * apply to. Reports cached before the key existed fall back to the median. */
export function meanStep(s: Summary): number {
  return f.isNumber(s.step_time_mean_us) ? s.step_time_mean_us : s.step_time_us;
}

export function stepBreakdownSummary(s: Summary): HTMLElement {
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

export function stepsChart(w: WorkerReport, summary: Summary): HTMLElement {
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
        ...valueAxisStyle,
      },
      tooltip: {
        ...axisTooltip,
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
    plainHead('Per step', 'Median', 'p10 – p90', 'Min – max'),
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
