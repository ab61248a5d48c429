// The step-time waterfall (WorkerReport.waterfall, diagnosis): from the mean step down to
// the time the model FLOPs would take at peak, one bar per cause of lost time.
import { card } from './card';
import { axisTooltip, chart, msPerStepAxis, tooltipNode } from './charts';
import { h } from './dom';
import { scope } from './field';
import * as f from './format';
import { SERIES, UI } from './palette';
import { plainHead } from './table';
import type { WaterfallBar, WorkerReport } from './types';

const WF_COLORS: Record<string, string> = {
  total: SERIES.slate,
  subtotal: SERIES.blue,
  result: SERIES.purple,
  idle: SERIES.grey,
  loss: SERIES.red,
};

interface WfBar {
  label: string;
  kind: WaterfallBar['kind'];
  base: number; // ms
  value: number | null; // ms; null: the result bar when MFU is unknown (drawn as no bar)
  us: number | null;
  share: number | null;
  color: string;
  row: WaterfallBar;
}

export function waterfallBars(rows: WaterfallBar[]): WfBar[] {
  const bars: WfBar[] = [];
  let running = 0;
  for (const r of rows) {
    const { kind, label, share } = r;
    const us = r.us_per_step;
    const color =
      kind === 'loss'
        ? r.group === 'idle'
          ? WF_COLORS.idle
          : WF_COLORS.loss
        : (WF_COLORS[kind] ?? WF_COLORS.subtotal);
    if (us === null) {
      // unknown stays unknown: a row with no bar, labelled as such
      bars.push({ label, kind, base: 0, value: null, us, share, color, row: r });
    } else if (kind === 'loss') {
      if (us <= 0) continue; // nothing lost there: leave it to the table
      running = Math.max(0, running - us);
      bars.push({ label, kind, base: running / 1000, value: us / 1000, us, share, color, row: r });
    } else {
      running = us;
      bars.push({ label, kind, base: 0, value: us / 1000, us, share, color, row: r });
    }
  }
  return bars;
}

/** An invisible bar up to where each bar hangs, and the bar itself, labelled with its share. */
function waterfallSeries(bars: WfBar[]): object[] {
  return [
    {
      type: 'bar',
      stack: 'wf',
      silent: true,
      itemStyle: { color: 'transparent' },
      data: bars.map((b) => +b.base.toFixed(4)),
    },
    {
      type: 'bar',
      stack: 'wf',
      barMaxWidth: 16,
      data: bars.map((b) => ({
        value: b.value === null ? '-' : +b.value.toFixed(4),
        itemStyle: { color: b.color, borderRadius: 2 },
      })),
      label: {
        show: true,
        position: 'right',
        fontSize: 11,
        color: UI.dim,
        formatter: (p: { dataIndex: number }) => {
          const b = bars[p.dataIndex];
          if (b.share === null) return f.NA;
          return `${b.kind === 'loss' ? '−' : ''}${f.pct(b.share)}`;
        },
      },
    },
  ];
}

/** The width of the bars' labels (px): two lines hold the longest the report writes. */
const LABEL_WIDTH = 200;

/** The bars drawn from the step down to MFU: each loss hangs from what is left before it. */
function waterfallChart(bars: WfBar[]): HTMLElement {
  // room for a label on two lines: they wrap, never cut
  const el = h('div', {
    class: 'chart',
    testid: 'waterfall-chart',
    style: { height: `${Math.max(200, 48 + bars.length * 34)}px` },
  });
  queueMicrotask(() =>
    chart(el, {
      grid: { left: 12, right: 96, top: 8, bottom: 28, containLabel: true },
      xAxis: msPerStepAxis(),
      yAxis: {
        type: 'category',
        inverse: true,
        data: bars.map((b) => b.label),
        axisTick: { show: false },
        axisLabel: {
          color: UI.text,
          fontSize: 11,
          lineHeight: 13,
          // the whole label, wrapped at words: the report's longest (53 characters) takes two lines
          width: LABEL_WIDTH,
          overflow: 'break',
        },
      },
      tooltip: {
        ...axisTooltip(),
        formatter: (ps: { dataIndex: number }[]) => {
          const b = bars[ps[0].dataIndex];
          const mfu = b.row.mfu ?? null;
          return tooltipNode(
            b.label,
            [[b.color, b.kind === 'loss' ? 'lost per step' : 'per step', `${f.dur(b.us)} · ${f.pct(b.share)}`]],
            mfu !== null ? `MFU ${f.pct(mfu)}` : undefined,
          );
        },
      },
      series: waterfallSeries(bars),
    }),
  );
  return el;
}

/** The same rows as a table, losses of nothing included. */
function waterfallTable(rows: WaterfallBar[]): HTMLElement {
  return h(
    'table',
    { class: 'grid compact wf-table', testid: 'waterfall' },
    plainHead('Step time, split', 'Per step', 'Share'),
    h(
      'tbody',
      null,
      rows.map((r, i) => {
        return h(
          'tr',
          { class: `wf-${r.kind}`, data: scope(`waterfall.${i}`) },
          h('td', null, r.kind === 'loss' ? '− ' : '', r.label),
          h('td', { class: 'num' }, f.dur(r.us_per_step)),
          h('td', { class: 'num' }, f.pct(r.share)),
        );
      }),
    ),
  );
}

export function waterfallCard(w: WorkerReport): HTMLElement | null {
  const rows = w.waterfall;
  if (!rows.length) return null;
  const bars = waterfallBars(rows);
  if (!bars.length) return null;
  return card(
    'Where the step time goes, down to MFU',
    [waterfallChart(bars), h('details', null, h('summary', null, 'As a table'), waterfallTable(rows))],
    {
      testid: 'waterfall-card',
      help: "From the mean step time down to the time the model FLOPs would take at peak: each red bar is time lost to one cause, each blue bar what is left. Aggregated over the analysed steps like the summary, so the bars add up to the step as traced and match the GPU busy, kernel time and MFU of the traced steps above (the headline MFU is over the step without the profiler's host cost, which this does not take apart).",
      cls: 'wide',
    },
  );
}
