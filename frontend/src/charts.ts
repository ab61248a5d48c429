// ECharts, tree-shaken to what the tab draws. Tooltips are built as DOM nodes with text
// content (never HTML strings), because category names can be run names from the logdir.
import { BarChart, LineChart } from 'echarts/charts';
import {
  DataZoomInsideComponent,
  DataZoomSliderComponent,
  GridComponent,
  LegendComponent,
  MarkLineComponent,
  MarkPointComponent,
  TooltipComponent,
} from 'echarts/components';
import * as echarts from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';

import { h } from './dom';
import { UI } from './palette';

echarts.use([
  BarChart,
  LineChart,
  DataZoomInsideComponent,
  DataZoomSliderComponent,
  GridComponent,
  LegendComponent,
  TooltipComponent,
  MarkLineComponent,
  MarkPointComponent,
  CanvasRenderer,
]);

export type EChartsOption = echarts.EChartsCoreOption;

export const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

const live = new Set<echarts.ECharts>();
const observed = new WeakMap<HTMLElement, echarts.ECharts>();
const resizer =
  typeof ResizeObserver !== 'undefined'
    ? new ResizeObserver((entries) => {
        for (const e of entries) observed.get(e.target as HTMLElement)?.resize();
      })
    : null;

/** ECharts' defaults in the theme shown now (palette.ts's UI): text, axes, legends, tooltips and
 * zoom sliders that no chart colours itself. A chart is drawn again when the theme changes. */
function echartsTheme(): object {
  const axis = {
    axisLine: { lineStyle: { color: UI.lineStrong } },
    axisTick: { lineStyle: { color: UI.lineStrong } },
    axisLabel: { color: UI.dim },
    splitLine: { lineStyle: { color: UI.lineSoft } },
    nameTextStyle: { color: UI.dim },
  };
  return {
    backgroundColor: 'transparent',
    textStyle: { color: UI.text },
    legend: {
      textStyle: { color: UI.text },
      pageTextStyle: { color: UI.dim },
      pageIconColor: UI.dim,
      pageIconInactiveColor: UI.lineStrong,
    },
    categoryAxis: axis,
    valueAxis: axis,
    logAxis: axis,
    tooltip: tooltipBase(),
    dataZoom: { textStyle: { color: UI.dim }, borderColor: UI.line, backgroundColor: UI.bg },
  };
}

/** Draws ``option`` into ``el``, which must already be in the document. */
export function chart(el: HTMLElement, option: EChartsOption): echarts.ECharts {
  const c = echarts.init(el, echartsTheme(), { renderer: 'canvas' });
  c.setOption({ textStyle: { fontFamily: FONT }, animationDuration: 300, ...option });
  live.add(c);
  observed.set(el, c);
  resizer?.observe(el);
  return c;
}

/** Disposes the charts inside ``root`` (or all), before their DOM is replaced. */
export function disposeCharts(root?: Node): void {
  for (const c of Array.from(live)) {
    const dom = c.getDom();
    if (!root || root.contains(dom)) {
      resizer?.unobserve(dom);
      c.dispose();
      live.delete(c);
    }
  }
}

/** A tooltip body: a title line, then rows of (colour, label, value). Text only. */
export function tooltipNode(title: string, rows: [string, string, string][], footer?: string): HTMLElement {
  return h(
    'div',
    { class: 'tt' },
    h('div', { class: 'tt-title' }, title),
    rows.map(([color, label, value]) =>
      h(
        'div',
        { class: 'tt-row' },
        h('span', { class: 'tt-dot', style: { background: color } }),
        h('span', { class: 'tt-label' }, label),
        h('span', { class: 'tt-value' }, value),
      ),
    ),
    footer ? h('div', { class: 'tt-foot' }, footer) : null,
  );
}

/** A tooltip box in the theme shown now (a function: the theme can change between charts). */
export function tooltipBase(): EChartsOption {
  return {
    confine: true,
    backgroundColor: UI.surface,
    borderColor: UI.lineStrong,
    borderWidth: 1,
    padding: 8,
    textStyle: { color: UI.text, fontSize: 12 },
    extraCssText: `box-shadow: 0 2px 8px ${UI.shadowStrong}; border-radius: 6px;`,
  };
}

/** A tooltip for the whole category under the pointer (a step, a run, a waterfall bar). */
export function axisTooltip(): EChartsOption {
  return { ...tooltipBase(), trigger: 'axis', axisPointer: { type: 'shadow' } };
}

/** Labels and grid lines of a value axis, in the page's dim colours. */
export function valueAxisStyle(): EChartsOption {
  return { axisLabel: { color: UI.dim }, splitLine: { lineStyle: { color: UI.lineSoft } } };
}

/** The x axis of the charts in milliseconds per step, named below it (a fresh object per
 * chart: ECharts keeps the option objects it is given). */
export function msPerStepAxis(): EChartsOption {
  return { type: 'value', name: 'ms / step', nameLocation: 'middle', nameGap: 22, ...valueAxisStyle() };
}
