// The Roofline panel: each op against its own limit, min(peak FLOP/s, HBM bandwidth x intensity).
// Ops come from report.roofline (analysis/roofline.py); every string is rendered as text.
import { LineChart, ScatterChart } from 'echarts/charts';
import * as echarts from 'echarts/core';

import { card, cardNotes } from './card';
import { chart, tooltipBase, tooltipNode, valueAxisStyle } from './charts';
import { h } from './dom';
import * as f from './format';
import { COLORS, SERIES, UI } from './palette';
import { type Column, numColumn, plainHead, table } from './table';
import type { Roofline, RooflineClass, RooflineOp, WorkerReport } from './types';

echarts.use([ScatterChart, LineChart]);

const CLASS_COLORS: Record<string, string> = {
  matmul: SERIES.blue,
  conv: SERIES.green,
  attention: SERIES.purple,
  elementwise: SERIES.orange,
  norm: SERIES.red,
  softmax: SERIES.teal,
  reduction: SERIES.yellow,
  embedding: SERIES.brown,
  copy: SERIES.grey,
  pooling: SERIES.pink,
  optimizer: SERIES.lightGreen,
};

function classColor(c: string): string {
  return CLASS_COLORS[c] ?? COLORS.runs[Object.keys(CLASS_COLORS).length % COLORS.runs.length];
}

/** The roof share as text; above 100 % is marked, never shown as if true. */
function shareText(o: { roof_share: number | null }): string {
  if (!f.isNumber(o.roof_share)) return f.NA;
  return o.roof_share > 1 ? `${f.pct(o.roof_share)} ↑ above roof` : f.pct(o.roof_share);
}

function achievedText(o: RooflineOp | RooflineClass): string {
  if (o.bound === 'compute') return f.tflops(o.achieved_flops);
  return f.isNumber(o.achieved_bandwidth) ? f.gbps(o.achieved_bandwidth / 1e9) : f.NA;
}

function intensityText(x: number | null): string {
  return f.intensity(x);
}

function opTooltip(o: RooflineOp): HTMLElement {
  const c = classColor(o.class);
  return tooltipNode(
    o.name,
    [
      [c, 'Class', `${o.class}${o.dtype ? ` · ${o.dtype}` : ''}${o.bound ? ` · ${o.bound}-bound` : ''}`],
      [c, 'Time / step', `${f.dur(o.us_per_step)} · ${f.count(o.count_per_step)} × per step`],
      [c, 'Intensity', intensityText(o.intensity)],
      [
        c,
        'Achieved',
        `${f.tflops(o.achieved_flops)} · ${f.isNumber(o.achieved_bandwidth) ? f.gbps(o.achieved_bandwidth / 1e9) : f.NA}`,
      ],
      [c, 'Roof here', f.tflops(o.roof_flops)],
      [c, 'Share of roof', shareText(o)],
      [c, 'Lost / step', f.dur(o.lost_us_per_step)],
      [c, 'FLOPs · bytes / step', `${f.flops(o.flops_per_step)} · ${f.bytes(o.bytes_per_step)}`],
    ],
    o.shapes ? `shapes ${o.shapes}${o.exact ? '' : ' (approximate)'}` : undefined,
  );
}

/** An op a log-log chart can place: some arithmetic, and some FLOP/s achieved. */
type Placed = RooflineOp & { intensity: number; achieved_flops: number };

function placed(o: RooflineOp): o is Placed {
  return f.isNumber(o.intensity) && o.intensity > 0 && f.isNumber(o.achieved_flops) && o.achieved_flops > 0;
}

/** The chart's log axes: every op and both roofs inside, with room around them. */
interface Frame {
  ridge: number; // the intensity where the memory roof meets the compute roof
  xs: number[]; // the ops' intensities
  ys: number[]; // their TFLOP/s
  xmin: number;
  xmax: number;
  ymin: number;
  ymax: number;
}

/** ``ridge``: the report's ridge intensity (peak / bandwidth, Roofline.ridge_intensity), never recomputed here. */
function frame(peak: number, bw: number, ridge: number, plotted: Placed[]): Frame {
  const xs = plotted.map((o) => o.intensity);
  const ys = plotted.map((o) => o.achieved_flops / 1e12);
  const xmin = 10 ** Math.floor(Math.log10(Math.min(0.1, ...xs) / 2));
  const xmax = 10 ** Math.ceil(Math.log10(Math.max(ridge * 10, ...xs) * 2));
  const ymin = 10 ** Math.floor(Math.log10(Math.max(1e-6, Math.min((bw * xmin) / 1e12, ...ys) / 2)));
  const ymax = 10 ** Math.ceil(Math.log10((peak / 1e12) * 2));
  return { ridge, xs, ys, xmin, xmax, ymin, ymax };
}

/** The two roofs as lines: bandwidth x intensity up to the ridge, the peak after it. */
function roofLines(peak: number, bw: number, fr: Frame): object[] {
  return [
    {
      name: `Memory roof (${f.gbps(bw / 1e9)})`,
      type: 'line',
      data: [
        [fr.xmin, (bw * fr.xmin) / 1e12],
        [fr.ridge, peak / 1e12],
      ],
      showSymbol: false,
      symbol: 'circle', // the legend's mark: filled in the line's colour, on either theme
      lineStyle: { color: UI.dim, width: 2 },
      itemStyle: { color: UI.dim },
      z: 1,
    },
    {
      name: `Compute roof (${f.tflops(peak)})`,
      type: 'line',
      data: [
        [fr.ridge, peak / 1e12],
        [fr.xmax, peak / 1e12],
      ],
      showSymbol: false,
      symbol: 'circle',
      lineStyle: { color: UI.text, width: 2, type: 'dashed' },
      itemStyle: { color: UI.text },
      z: 1,
    },
  ];
}

/** The roofline of ``peak`` FLOP/s and ``bw`` bytes/s, with the ops on it. */
function rooflineChart(peak: number, bw: number, ridge: number, plotted: Placed[]): HTMLElement {
  const el = h('div', { class: 'chart tall', testid: 'roofline-chart' });
  const fr = frame(peak, bw, ridge, plotted);
  const maxUs = Math.max(1e-9, ...plotted.map((o) => o.us_per_step));
  const classes = Array.from(new Set(plotted.map((o) => o.class)));
  const axisStyle = {
    nameTextStyle: { color: UI.dim },
    ...valueAxisStyle(),
  };
  queueMicrotask(() =>
    chart(el, {
      grid: { left: 72, right: 24, top: 48, bottom: 48 },
      legend: { top: 0, textStyle: { color: UI.text }, type: 'scroll' },
      xAxis: {
        type: 'log',
        min: fr.xmin,
        max: fr.xmax,
        interval: 1,
        name: 'arithmetic intensity (FLOP / byte)',
        nameLocation: 'middle',
        nameGap: 28,
        ...axisStyle,
      },
      yAxis: { type: 'log', min: fr.ymin, max: fr.ymax, interval: 1, name: 'TFLOP/s', ...axisStyle },
      tooltip: {
        ...tooltipBase(),
        trigger: 'item',
        formatter: (p: { seriesType: string; data: number[]; seriesName: string }) => {
          if (p.seriesType === 'scatter') return opTooltip(plotted[p.data[2]]);
          return tooltipNode(p.seriesName, [[UI.text, 'Ridge', intensityText(fr.ridge)]]);
        },
      },
      series: [
        ...roofLines(peak, bw, fr),
        ...classes.map((c) => ({
          name: c,
          type: 'scatter',
          itemStyle: { color: classColor(c), opacity: 0.8, borderColor: UI.surface, borderWidth: 0.5 },
          symbolSize: (d: number[]) => 6 + 34 * Math.sqrt(plotted[d[2]].us_per_step / maxUs),
          data: plotted.map((_, i) => [fr.xs[i], fr.ys[i], i] as number[]).filter((d) => plotted[d[2]].class === c),
          z: 2,
        })),
      ],
    }),
  );
  return el;
}

function facts(r: Roofline): HTMLElement {
  const rows: [string, string, string][] = [
    ['Peak', f.tflops(r.peak_flops), r.peak_source ?? ''],
    ['HBM bandwidth', f.isNumber(r.peak_bandwidth) ? f.gbps(r.peak_bandwidth / 1e9) : f.NA, r.bandwidth_source ?? ''],
    [
      'Ridge',
      intensityText(r.ridge_intensity),
      'Ops with a lower intensity cannot reach the peak: their roof is bandwidth x intensity',
    ],
    [
      'GPU time on the chart',
      `${f.pct(r.coverage)} · ${f.dur(r.modelled_us_per_step)} / step`,
      'Share of the GPU time of the analysed steps launched by ops with a byte formula and recorded shapes',
    ],
  ];
  return h(
    'dl',
    { class: 'facts', testid: 'roofline-facts' },
    rows.map(([k, v, t]) => [h('dt', { title: t }, k), h('dd', { title: t }, v)]),
  );
}

const OP_COLUMNS: Column<RooflineOp>[] = [
  {
    key: 'name',
    label: 'Op',
    value: (o) => o.name,
    cls: 'kcell',
    cell: (o) =>
      h(
        'span',
        { class: 'kname mono may-overflow', title: `${o.name} ${o.shapes}` },
        o.name,
        h('span', { class: 'dim' }, ` ${o.shapes}`),
      ),
  },
  { key: 'class', label: 'Class', value: (o) => o.class, cell: (o) => `${o.class}${o.dtype ? ` · ${o.dtype}` : ''}` },
  { key: 'bound', label: 'Bound', value: (o) => o.bound ?? '', cell: (o) => o.bound ?? f.NA },
  numColumn('time', 'Time / step', (o) => o.us_per_step, f.dur),
  numColumn('intensity', 'Intensity', (o) => o.intensity, intensityText, 'FLOPs per byte of minimum HBM traffic'),
  {
    key: 'achieved',
    label: 'Achieved',
    num: true,
    value: (o) => (o.bound === 'compute' ? o.achieved_flops : o.achieved_bandwidth),
    cell: achievedText,
    title: "FLOP/s for compute-bound ops, HBM bytes/s for memory-bound ones, over the op's GPU time",
  },
  {
    key: 'share',
    label: 'Share of roof',
    num: true,
    value: (o) => o.roof_share,
    cell: (o) => h('span', { class: o.above_roof ? 'warn-text' : '' }, shareText(o)),
    title: 'Time at the roof / GPU time. Above 100 %: cached data or a byte model that over-counts',
  },
  numColumn('lost', 'Lost / step', (o) => o.lost_us_per_step, f.dur, 'GPU time minus the time at the roof'),
];

function opsTable(ops: RooflineOp[]): HTMLElement {
  return table<RooflineOp>(ops, OP_COLUMNS, {
    testid: 'roofline-table',
    sortKey: 'lost',
    maxRows: 12,
    filter: (o, q) => `${o.name} ${o.class} ${o.shapes}`.toLowerCase().includes(q),
    filterPlaceholder: 'Filter ops by name, class or shape',
    empty: 'No ops on the roofline.',
  });
}

function classesTable(cs: RooflineClass[]): HTMLElement {
  return h(
    'table',
    { class: 'grid compact', testid: 'roofline-classes' },
    plainHead('Class', 'Time / step', 'Bound', 'Achieved', 'Share of roof', 'Lost / step'),
    h(
      'tbody',
      null,
      cs.map((c) =>
        h(
          'tr',
          null,
          h('td', null, h('span', { class: 'tt-dot', style: { background: classColor(c.class) } }), ' ', c.class),
          h('td', { class: 'num' }, f.dur(c.us_per_step)),
          h('td', { class: 'num' }, c.bound ?? f.NA),
          h('td', { class: 'num' }, achievedText(c)),
          h('td', { class: 'num' }, shareText(c)),
          h('td', { class: 'num' }, f.dur(c.lost_us_per_step)),
        ),
      ),
    ),
  );
}

export function rooflineCard(w: WorkerReport): HTMLElement | null {
  const r = w.roofline;
  if (!r) return null;
  const help =
    'Each op (outermost, counted once, as for MFU) placed by its arithmetic intensity (FLOPs per byte of minimum HBM traffic: inputs read and outputs written once) and its achieved FLOP/s over its GPU time. The roof is min(peak, bandwidth x intensity). Point size: GPU time per step. Elementwise FLOPs are counted here to place the ops; MFU does not count them.';
  if (!r.ops.length) {
    return card(
      'Roofline',
      h(
        'p',
        { class: 'muted', testid: 'roofline-empty' },
        r.notes[0] ?? 'No op with recorded shapes launched GPU work (record with record_shapes=True).',
      ),
      { testid: 'roofline-card', cls: 'wide', help },
    );
  }
  const peak = f.isNumber(r.peak_flops) ? r.peak_flops : null;
  const bw = f.isNumber(r.peak_bandwidth) ? r.peak_bandwidth : null;
  const ridge = f.isNumber(r.ridge_intensity) ? r.ridge_intensity : null;
  const hasRoof = peak !== null && bw !== null && ridge !== null;
  const plotted = hasRoof ? r.ops.filter(placed) : [];
  const offChart = r.ops.length - plotted.length;
  const notes = [...r.notes];
  if (offChart && hasRoof)
    notes.push(
      `${f.counted(offChart, 'op')} without arithmetic (copies, gathers, fills) ${offChart === 1 ? 'is' : 'are'} in the table only: a log chart cannot place 0 FLOP/s.`,
    );
  if (r.ops_left_out)
    notes.push(
      `${r.ops_left_out} smaller ops (${f.dur(r.ops_left_out_us_per_step)} per step) are left out of the report.`,
    );
  return card(
    'Roofline',
    [
      facts(r),
      hasRoof ? rooflineChart(peak, bw, ridge, plotted) : null,
      h('h3', null, 'Top ops by time lost below their roof'),
      opsTable(r.ops),
      r.classes.length ? h('h3', null, 'By op class') : null,
      r.classes.length ? classesTable(r.classes) : null,
      r.unmodelled.length
        ? h(
            'details',
            { testid: 'roofline-unmodelled' },
            h('summary', null, `GPU time not on the roofline: ${f.dur(r.unmodelled_us_per_step)} per step`),
            h(
              'ul',
              { class: 'plain' },
              r.unmodelled.map((u) =>
                h('li', null, h('span', { class: 'mono' }, u.name), ` — ${f.dur(u.us_per_step)} per step, ${u.reason}`),
              ),
            ),
          )
        : null,
      cardNotes(notes),
    ],
    { testid: 'roofline-card', cls: 'wide', help },
  );
}
