// The step and where its time goes: the exclusive parts (kernel, memcpy, memset, sync wait,
// idle) as a bar, per step as a chart, and how the step time and shares vary over the steps.
import { card } from './card';
import { axisTooltip, chart, tooltipNode, valueAxisStyle } from './charts';
import { AGGREGATION, type Figure } from './definitions';
import { h } from './dom';
import { field, scope } from './field';
import * as f from './format';
import { COLORS, UI } from './palette';
import { plainHead } from './table';
import type { Spread, Step, Summary, WorkerReport } from './types';

/** The exclusive parts of the step, labelled and explained by the definitions (definitions.ts). */
const PART = (key: string, name: Figure, color: string) => ({
  key,
  label: f.label(name),
  color,
  help: f.definition(name),
});

export const BREAKDOWN: { key: string; label: string; color: string; help: string }[] = [
  PART('kernel', 'breakdown.kernel', COLORS.kernel),
  PART('memcpy', 'breakdown.memcpy', COLORS.memcpy),
  PART('memset', 'breakdown.memset', COLORS.memset),
  PART('idle_after_sync', 'breakdown.idle_after_sync', COLORS.sync),
  PART('idle_other', 'breakdown.idle_other', COLORS.idle),
];

/** A part's time in the mean step (Summary.breakdown_us_per_step); reports cached before the key
 * existed have none, and show no time rather than one the tab made up. */
export function partUs(s: Summary, key: string): number | null {
  return s.breakdown_us_per_step?.[key] ?? null;
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
          title: `${c.label}: ${f.pct(v)} · ${f.dur(partUs(s, c.key))}`,
        }),
      );
    legend.append(
      h(
        'div',
        { class: 'leg', title: c.help },
        h('span', { class: 'dot', style: { background: c.color } }),
        h('span', { class: 'leg-label' }, c.label),
        h('span', { class: 'leg-val', data: field(`summary.breakdown.${c.key}`) }, f.pct(v)),
        h('span', { class: 'leg-ms', data: field(`summary.breakdown_us_per_step.${c.key}`) }, f.dur(partUs(s, c.key))),
      ),
    );
  }
  return h('div', { class: 'breakdown' }, bar, legend);
}

/** Above this many steps the chart draws each series as one path (ECharts' large mode) and
 * gains a zoom: one element per bar took the tab 80 s to draw a 100,000-step window. */
const LARGE_STEPS = 2000;

export function stepsChart(w: WorkerReport, summary: Summary): HTMLElement {
  const steps = w.steps ?? [];
  const many = steps.length > LARGE_STEPS;
  const el = h('div', { class: 'chart', testid: 'steps-chart' });
  if (!steps.length) return card('Per-step breakdown', h('p', { class: 'muted' }, 'No complete steps.'));
  // The part's time in that step (Step.breakdown_us, from the analysis); a report cached before
  // the field existed draws no bar and shows no time, rather than one the tab made up.
  const partMs = (s: Step, key: string): number | null => {
    const us = s.breakdown_us?.[key];
    return f.isNumber(us) ? us / 1000 : null;
  };
  queueMicrotask(() =>
    chart(el, {
      color: BREAKDOWN.map((b) => b.color),
      grid: { left: 64, right: 16, top: 36, bottom: many ? 64 : 36 },
      dataZoom: many ? [{ type: 'inside' }, { type: 'slider', height: 16, bottom: 8 }] : undefined,
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
        ...valueAxisStyle(),
      },
      tooltip: {
        ...axisTooltip(),
        formatter: (ps: { dataIndex: number }[]) => {
          const s = steps[ps[0].dataIndex];
          return tooltipNode(
            `Step ${s.step} · ${f.dur(s.dur_us)}`,
            BREAKDOWN.map((b) => [
              b.color,
              b.label,
              `${f.dur(s.breakdown_us?.[b.key])} · ${f.pct(s.breakdown?.[b.key])}`,
            ]),
            `${f.label('steps.mfu')} ${f.pct(s.mfu)} · SM eff. ${f.pct(s.sm_efficiency)}`,
          );
        },
      },
      series: BREAKDOWN.map((b) => ({
        name: b.label,
        type: 'bar',
        stack: 'step',
        barMaxWidth: 56,
        large: true,
        largeThreshold: LARGE_STEPS,
        emphasis: { focus: 'series' },
        data: steps.map((s) => {
          const ms = partMs(s, b.key);
          return ms === null ? null : +ms.toFixed(3);
        }),
      })),
    }),
  );
  return card('Per-step breakdown', [el, spreadBlock(summary)], {
    help: `Each profiled step split into exclusive parts: ${BREAKDOWN.map((b) => b.label).join(', ')}. Below, each step's own figures: their median is the median step's, which differs from the figures above, time-weighted over all the analysed steps.`,
    testid: 'steps-card',
  });
}

// The summary.distribution keys, each a figure of the definitions (step_time_us: the steps' durations).
const SPREAD_ROWS: Figure[] = [
  'step_time_us',
  'gpu_busy_share',
  'kernel_time_share',
  'sm_efficiency',
  'idle_share',
  'tensor_core_kernel_share',
  'mfu',
];

// A row whose per-step figure is not the headline's: each step's MFU is over its traced duration, the
// headline over the step without the profiler, so the row is named for what it is.
const SPREAD_LABEL: Partial<Record<Figure, Figure>> = { mfu: 'steps.mfu' };

/** The per-step spread of the step time and the main shares (summary.distribution): each step's
 * own figure, so the median column is the median step's, not the headline over all the steps. */
function spreadBlock(s: Summary): HTMLElement | null {
  const d = s.distribution ?? {};
  const rows = SPREAD_ROWS.filter((key) => d[key]);
  if (!rows.length) return null;
  const range = (key: Figure, a: number, b: number) =>
    a === b ? f.figure(key, a) : `${f.figure(key, a)} – ${f.figure(key, b)}`;
  return h(
    'table',
    {
      class: 'grid compact spread',
      testid: 'step-spread',
      data: scope('summary'),
      title: `Each figure of each of the ${s.steps} analysed steps: the median step's, the p10/p90 (linear interpolation between the sorted per-step values) and the extremes. The headline figures above are ${AGGREGATION} instead.`,
    },
    plainHead(`Per step (${f.counted(s.steps, 'step')})`, 'Median step', 'p10 – p90', 'Min – max'),
    h(
      'tbody',
      null,
      rows.map((key) => {
        const sp: Spread = d[key];
        return h(
          'tr',
          { data: { key, ...scope(`distribution.${key}`) } },
          h('th', { title: f.definition(SPREAD_LABEL[key] ?? key) }, f.label(SPREAD_LABEL[key] ?? key)),
          h('td', { class: 'num' }, f.figure(key, sp.median)),
          h('td', { class: 'num' }, range(key, sp.p10, sp.p90)),
          h('td', { class: 'num' }, range(key, sp.min, sp.max)),
        );
      }),
    ),
  );
}
