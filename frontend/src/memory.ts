// Device memory (WorkerReport.memory, profile_memory=True traces; docs/memory.md): the peak against
// the device, the batch headroom, allocated and reserved over the analysed steps with the peak and its
// op marked, the per-step table and the ops alive at the peak. No card without memory events.
import { card, cardNotes } from './card';
import { axisTooltip, chart, tooltipNode, valueAxisStyle } from './charts';
import type { Figure } from './definitions';
import { h } from './dom';
import * as f from './format';
import { SERIES, UI } from './palette';
import type { Memory, MemoryOp, MemoryStep } from './report_types';
import { type Column, numColumn, table } from './table';
import type { WorkerReport } from './types';

const COLOR = { allocated: SERIES.blue, reserved: SERIES.orange, peak: SERIES.red };

function kpi(name: Figure, value: string, sub = ''): HTMLElement {
  return h(
    'div',
    { class: 'kpi', title: f.definition(name) },
    h('div', { class: 'kpi-label' }, f.label(name)),
    h('div', { class: 'kpi-value kpi-value-small', testid: `memory-${name.replace(/\./g, '-')}` }, value),
    sub ? h('div', { class: 'kpi-sub' }, sub) : null,
  );
}

function kpis(m: Memory): HTMLElement {
  const hr = m.headroom;
  const where = [m.peak_phase, m.peak_op].filter(Boolean).join(' · ');
  return h(
    'div',
    { class: 'kpis comm', testid: 'memory-kpis' },
    kpi('memory.peak_allocated_bytes', f.figure('memory.peak_allocated_bytes', m.peak_allocated_bytes), where),
    kpi(
      'memory.peak_share',
      f.figure('memory.peak_share', m.peak_share),
      m.device_total_bytes !== null ? `of ${f.figure('memory.device_total_bytes', m.device_total_bytes)}` : '',
    ),
    kpi('memory.peak_reserved_bytes', f.figure('memory.peak_reserved_bytes', m.peak_reserved_bytes)),
    kpi(
      'memory.headroom.batch_factor',
      f.figure('memory.headroom.batch_factor', hr?.batch_factor),
      hr ? `${f.figure('memory.headroom.batch_factor_at_90', hr.batch_factor_at_90)} to 90 %` : '',
    ),
    kpi('memory.growth_per_step_bytes', f.figure('memory.growth_per_step_bytes', m.growth_per_step_bytes)),
  );
}

/** Allocated and reserved over the analysed steps (µs from the first step's start), the peak marked. */
function timelineChart(m: Memory): HTMLElement | null {
  const t = m.timeline;
  if (!t?.t_us.length) return null;
  const el = h('div', { class: 'chart', testid: 'memory-chart' });
  const points = (ys: (number | null)[]) => t.t_us.map((x, i) => [x / 1000, ys[i]]);
  // where to mark the peak on the sampled curve; its figure is the report's (the samples may miss the exact event)
  const peakAt = t.allocated.indexOf(Math.max(...t.allocated));
  const peakLabel = `peak ${f.figure('memory.peak_allocated_bytes', m.peak_allocated_bytes)}${m.peak_op ? ` · ${m.peak_op}` : ''}`;
  queueMicrotask(() =>
    chart(el, {
      color: [COLOR.allocated, COLOR.reserved],
      grid: { left: 72, right: 16, top: 36, bottom: 36 },
      legend: { top: 0, icon: 'roundRect', itemWidth: 12, itemHeight: 10, textStyle: { color: UI.text } },
      xAxis: { type: 'value', name: 'ms', nameLocation: 'middle', nameGap: 24, ...valueAxisStyle() },
      yAxis: { type: 'value', ...valueAxisStyle(), axisLabel: { color: UI.dim, formatter: (v: number) => f.bytes(v) } },
      tooltip: {
        ...axisTooltip(),
        axisPointer: { type: 'line' },
        formatter: (ps: { dataIndex: number }[]) => {
          const i = ps[0].dataIndex;
          return tooltipNode(f.dur(t.t_us[i]), [
            [COLOR.allocated, 'allocated', f.bytes(t.allocated[i])],
            [COLOR.reserved, 'reserved', f.bytes(t.reserved[i])],
          ]);
        },
      },
      series: [
        {
          name: 'allocated',
          type: 'line',
          step: 'end',
          showSymbol: false,
          data: points(t.allocated),
          markPoint: {
            symbol: 'pin',
            symbolSize: 36,
            itemStyle: { color: COLOR.peak },
            label: { show: false },
            data: [{ name: peakLabel, coord: [t.t_us[peakAt] / 1000, t.allocated[peakAt]], value: peakLabel }],
            tooltip: { ...axisTooltip(), trigger: 'item', formatter: () => peakLabel },
          },
          markLine: {
            silent: true,
            symbol: 'none',
            label: { show: false },
            lineStyle: { color: UI.lineStrong, type: 'dashed' },
            data: (t.step_starts_us ?? []).map((x) => ({ xAxis: x / 1000 })),
          },
        },
        { name: 'reserved', type: 'line', step: 'end', showSymbol: false, data: points(t.reserved) },
      ],
    }),
  );
  return h('div', null, el, h('p', { class: 'dim small', testid: 'memory-peak' }, peakLabel));
}

const bytesColumn = (key: keyof MemoryStep & string, name: Figure): Column<MemoryStep> =>
  numColumn(
    key,
    f.label(name),
    (s) => s[key] as number | null,
    (v) => f.figure(name, v),
    f.definition(name),
  );

const STEP_COLUMNS: Column<MemoryStep>[] = [
  numColumn('step', 'Step', (s) => s.step, f.counter(0)),
  bytesColumn('peak_allocated_bytes', 'memory.steps.peak_allocated_bytes'),
  bytesColumn('peak_reserved_bytes', 'memory.steps.peak_reserved_bytes'),
  bytesColumn('allocated_start_bytes', 'memory.steps.allocated_start_bytes'),
  bytesColumn('allocated_end_bytes', 'memory.steps.allocated_end_bytes'),
  bytesColumn('growth_bytes', 'memory.steps.growth_bytes'),
  bytesColumn('reserved_minus_allocated_bytes', 'memory.steps.reserved_minus_allocated_bytes'),
  { key: 'phase', label: 'Peak in', value: (s) => s.peak_phase ?? '' },
  {
    key: 'op',
    label: 'Peak op',
    value: (s) => s.peak_op ?? '',
    cell: (s) => h('span', { class: 'mono', title: s.peak_root_op ?? '' }, s.peak_op ?? ''),
  },
];

const OP_COLUMNS: Column<MemoryOp>[] = [
  { key: 'name', label: 'Op', value: (o) => o.name, cell: (o) => h('span', { class: 'mono' }, o.name) },
  {
    key: 'root',
    label: 'Inside',
    value: (o) => o.root_op ?? '',
    cell: (o) => h('span', { class: 'mono' }, o.root_op ?? ''),
  },
  numColumn('bytes', 'Bytes', (o) => o.bytes, f.bytes),
  {
    key: 'count',
    label: 'Allocations',
    num: true,
    value: (o) => o.count,
    cell: (o) => (o.count ? f.count(o.count, 0) : ''), // none for what was allocated before the step
  },
];

function recomputeLine(m: Memory): HTMLElement | null {
  const r = m.recompute;
  if (!r) return null;
  return h(
    'p',
    { testid: 'memory-recompute' },
    h('strong', null, 'Activation checkpointing: '),
    `${f.label('memory.recompute.us_per_step')} ${f.figure('memory.recompute.us_per_step', r.us_per_step)} `,
    `(host ${f.dur(r.host_us_per_step)}, GPU ${f.dur(r.gpu_us_per_step)}); `,
    `${f.label('memory.recompute.saved_bytes')} ${f.figure('memory.recompute.saved_bytes', r.saved_bytes)}`,
  );
}

/** The card, or null for a trace without memory figures (its report's memory.unavailable says why). */
export function memoryCard(w: WorkerReport): HTMLElement | null {
  const m = w.memory;
  if (!m || m.unavailable !== null) return null;
  return card(
    'Memory',
    [
      kpis(m),
      timelineChart(m),
      recomputeLine(m),
      table<MemoryStep>(m.steps, STEP_COLUMNS, {
        testid: 'memory-steps-table',
        sortKey: 'step',
        sortDesc: false,
        // a long window has a row per step: the first ones, and a button for the rest
        maxRows: 20,
      }),
      m.top_ops.length
        ? [
            h('h3', null, `Alive at the peak (step ${m.peak_step ?? f.NA}), by the op that allocated`),
            table<MemoryOp>(m.top_ops, OP_COLUMNS, { testid: 'memory-ops-table', sortKey: 'bytes' }),
          ]
        : null,
      m.kept_ops.length
        ? [
            h('h3', null, 'Kept from step to step (allocated, never freed), per step'),
            table<MemoryOp>(m.kept_ops, OP_COLUMNS, { testid: 'memory-kept-table', sortKey: 'bytes' }),
          ]
        : null,
      cardNotes(m.notes),
    ],
    {
      testid: 'memory-card',
      cls: 'wide',
      help: `The caching allocator's [memory] events (profile_memory=True): allocated and reserved device memory over the analysed steps, the peak and the op it falls in. ${f.label('memory.headroom.batch_factor')}: ${f.definition('memory.headroom.batch_factor')}.`,
    },
  );
}
