// The Timeline card (WorkerReport.timeline, docs/timeline.md): one representative step as lanes
// (host threads, GPU streams, copies, GPU idle) drawn on a canvas by an ECharts custom series, the
// critical path under the work it runs through, and each finding's marks in a row of their own and
// outlined on their lanes. Wheel or pinch zooms, dragging pans; a mark opens its finding, and each
// finding of the Findings card gets a "Show on timeline" button. Names are trace text: ECharts draws
// them on the canvas, and tooltips are DOM nodes with text content.
import { CustomChart } from 'echarts/charts';
import * as echarts from 'echarts/core';
import { card, cardNotes } from './card';
import { chart, disposeCharts, tooltipBase, tooltipNode } from './charts';
import { h } from './dom';
import * as f from './format';
import { CRITICAL_PATH, SERIES, UI } from './palette';
import type { Timeline, TimelineMark } from './report_types';
import type { Finding, WorkerReport } from './types';

echarts.use([CustomChart]);

/** Each interval class's colour and label (Timeline.classes), the critical path card's hues. */
export const CLASSES: Record<string, [string, string]> = {
  matmul: [SERIES.blue, 'matmul'],
  attention: [SERIES.purple, 'attention'],
  elementwise: [SERIES.green, 'elementwise'],
  kernel: [SERIES.lightGreen, 'other kernel'],
  communication: [SERIES.yellow, 'communication'],
  copy: [SERIES.slate, 'copy'],
  memset: [SERIES.grey, 'memset'],
  host_op: [SERIES.brown, 'host op'],
  launch: [SERIES.orange, 'launch'],
  runtime: [SERIES.teal, 'runtime call'],
  sync_wait: [SERIES.red, 'sync wait'],
  gpu_gap: [UI.line, f.label('idle_share')],
};
const SEVERITY: Record<Finding['severity'], string> = { high: UI.bad, medium: UI.warnEdge, low: UI.infoEdge };
const PATH = 'critical path';
const MARKS = 'findings';
const ROW_PX = 26;
const LABEL_PX = 190;

type Api = {
  value: (i: number) => number;
  coord: (v: number[]) => number[];
  size: (v: number[]) => number[];
};
type Params = { coordSys: { x: number; y: number; width: number; height: number }; dataIndex: number };

/** What a drawn timeline offers the page: showing a finding's marks. */
export interface TimelineView {
  el: HTMLElement;
  show: (finding: number) => void;
}

function keyOf(id: string, subject: string | null | undefined): string {
  return `${id}\u0000${subject ?? ''}`;
}

/** Each mark's finding (its index in w.findings; -1 when the report has none such). */
function markFindings(w: WorkerReport, t: Timeline): number[] {
  const at = new Map(w.findings.map((fd, i) => [keyOf(fd.id, fd.subject), i]));
  return t.marks.map((m) => at.get(keyOf(m.id, m.subject)) ?? -1);
}

/** A rectangle of the plot, clipped to it; null when outside. */
function clipped(params: Params, x0: number, x1: number, y: number, height: number) {
  const c = params.coordSys;
  return echarts.graphic.clipRectByRect(
    { x: x0, y, width: Math.max(x1 - x0, 0.6), height },
    { x: c.x, y: c.y, width: c.width, height: c.height },
  );
}

function intervalSeries(t: Timeline, top: number, shade: () => boolean) {
  const iv = t.intervals;
  return t.classes.map((cls, c) => {
    const data: number[][] = [];
    for (let k = 0; k < iv.lane.length; k++)
      if (iv.cls[k] === c)
        data.push([iv.start_us[k] / 1000, iv.lane[k] + top, (iv.start_us[k] + iv.dur_us[k]) / 1000, k]);
    const color = CLASSES[cls]?.[0] ?? SERIES.grey;
    return {
      type: 'custom',
      name: CLASSES[cls]?.[1] ?? cls,
      itemStyle: { color },
      encode: { x: [0, 2], y: 1 },
      data,
      renderItem: (params: Params, api: Api) => {
        const a = api.coord([api.value(0), api.value(1)]);
        const b = api.coord([api.value(2), api.value(1)]);
        const band = api.size([0, 1])[1];
        const shape = clipped(params, a[0], b[0], a[1] - band * 0.35, band * 0.7);
        const sm = iv.sm_efficiency[api.value(3)];
        const opacity = shade() && sm !== null && sm !== undefined ? 0.25 + 0.75 * sm : 1;
        return shape && { type: 'rect', shape, style: { fill: color, opacity } };
      },
    };
  });
}

function pathSeries(t: Timeline, top: number) {
  const p = t.critical_path;
  if (!p) return [];
  const data = p.lane.map((lane, k) => [
    p.start_us[k] / 1000,
    lane + top,
    (p.start_us[k] + p.dur_us[k]) / 1000,
    p.cls[k],
    k > 0 ? p.lane[k - 1] + top : lane + top,
    k,
  ]);
  return [
    {
      type: 'custom',
      name: PATH,
      itemStyle: { color: UI.text },
      encode: { x: [0, 2], y: 1 },
      z: 3,
      data,
      renderItem: (params: Params, api: Api) => {
        const a = api.coord([api.value(0), api.value(1)]);
        const b = api.coord([api.value(2), api.value(1)]);
        const band = api.size([0, 1])[1];
        const shape = clipped(params, a[0], b[0], a[1] + band * 0.3, 3);
        const from = api.coord([api.value(0), api.value(4)]);
        const fill = CRITICAL_PATH[p.classes[api.value(3)]] ?? UI.text;
        const children: object[] = shape ? [{ type: 'rect', shape, style: { fill: UI.text } }] : [];
        if (shape) children.push({ type: 'rect', shape: { ...shape, height: 1.5 }, style: { fill } });
        if (api.value(4) !== api.value(1) && shape)
          children.push({
            type: 'line',
            shape: { x1: a[0], y1: from[1] + band * 0.3, x2: a[0], y2: a[1] + band * 0.3 },
            style: { stroke: UI.text, lineWidth: 1, lineDash: [2, 2] },
          });
        return { type: 'group', children };
      },
    },
  ];
}

/** The marks: each in its finding's row (rows 0..top-1), and outlined on its lane. */
function markSeries(w: WorkerReport, t: Timeline, of: number[], top: number, rendered: Map<number, number[]>) {
  const data = t.marks
    .map((m, k) => [m.start_us / 1000, m.lane === null ? -1 : m.lane + top, (m.start_us + m.dur_us) / 1000, k, of[k]])
    .filter((d) => d[4] >= 0);
  return {
    type: 'custom',
    name: MARKS,
    itemStyle: { color: UI.bad },
    encode: { x: [0, 2], y: 1 },
    z: 4,
    data,
    renderItem: (params: Params, api: Api) => {
      const k = api.value(3);
      const fd = w.findings[of[k]];
      const stroke = fd ? SEVERITY[fd.severity] : UI.dim;
      const row = api.coord([api.value(0), api.value(4)]);
      const end = api.coord([api.value(2), api.value(4)]);
      const band = api.size([0, 1])[1];
      const flag = clipped(params, row[0], Math.max(end[0], row[0] + 5), row[1] - band * 0.3, band * 0.6);
      const children: object[] = flag ? [{ type: 'rect', shape: flag, style: { fill: stroke, opacity: 0.85 } }] : [];
      if (api.value(1) >= top) {
        const a = api.coord([api.value(0), api.value(1)]);
        const b = api.coord([api.value(2), api.value(1)]);
        const box = clipped(params, a[0] - 1, Math.max(b[0], a[0] + 3) + 1, a[1] - band * 0.45, band * 0.9);
        if (box) children.push({ type: 'rect', shape: box, style: { fill: 'none', stroke, lineWidth: 2 } });
      }
      if (flag) rendered.set(k, [flag.x + flag.width / 2, flag.y + flag.height / 2]);
      return { type: 'group', children };
    },
  };
}

function tooltipOf(w: WorkerReport, t: Timeline, of: number[]) {
  const iv = t.intervals;
  const bins = new Map(iv.bins.map((k, j) => [k, j]));
  return (p: { seriesName: string; data: number[] }) => {
    const k = p.data[3];
    if (p.seriesName === MARKS) {
      const m: TimelineMark = t.marks[k];
      const fd = w.findings[of[k]];
      return tooltipNode(
        fd ? fd.title : m.id,
        [
          [fd ? SEVERITY[fd.severity] : UI.dim, m.id, fd ? `saves ≈ ${f.dur(fd.est_gain_us_per_step)} / step` : ''],
          [UI.dim, 'here', m.what],
        ],
        'Click to open the finding',
      );
    }
    if (p.seriesName === PATH) {
      const path = t.critical_path;
      if (!path) return '';
      const cls = path.classes[p.data[3]];
      return tooltipNode(`critical path: ${cls}`, [
        [CRITICAL_PATH[cls] ?? UI.text, 'for', f.dur(path.dur_us[p.data[5]])],
        [UI.dim, 'on', t.lanes[path.lane[p.data[5]]]?.name ?? ''],
      ]);
    }
    const cls = t.classes[iv.cls[k]];
    const rows: [string, string, string][] = [
      [CLASSES[cls]?.[0] ?? SERIES.grey, 'class', CLASSES[cls]?.[1] ?? cls],
      [UI.dim, 'duration', f.dur(iv.dur_us[k])],
      [UI.dim, 'starts at', `${f.dur(iv.start_us[k])} into the step`],
      [UI.dim, f.label('sm_efficiency'), iv.sm_efficiency[k] === null ? f.NA : f.pct(iv.sm_efficiency[k])],
    ];
    if (iv.op[k] >= 0) rows.push([UI.dim, 'op', t.names[iv.op[k]]]);
    const j = bins.get(k);
    if (j !== undefined)
      rows.push([UI.dim, 'merged', `${iv.bin_count[j]} events, ${f.dur(iv.bin_busy_us[j])} of work (longest named)`]);
    return tooltipNode(t.names[iv.name[k]] ?? '', rows, t.lanes[iv.lane[k]]?.name);
  };
}

/** Scrolls the Findings card to finding ``i`` and opens its evidence. */
function openFinding(from: HTMLElement, i: number): void {
  const root = from.closest('.overview') ?? document;
  const li = root.querySelector<HTMLElement>(`li.finding[data-index="${i}"]`);
  if (!li) return;
  li.scrollIntoView({ block: 'center', behavior: 'smooth' });
  const details = li.querySelector('details');
  if (details) details.open = true;
  li.style.setProperty('outline', `2px solid ${UI.accent}`);
  setTimeout(() => li.style.removeProperty('outline'), 1600);
}

/** Draws ``t`` into ``el`` (in the document); ``xMax``: the x axis' end in ms (Compare's shared scale). */
export function drawTimeline(
  el: HTMLElement,
  w: WorkerReport,
  t: Timeline,
  opts: { xMax?: number; shade?: () => boolean; onMark?: (finding: number) => void } = {},
): echarts.ECharts {
  const of = markFindings(w, t);
  const rendered = new Map<number, number[]>(); // mark -> where its flag was drawn (px)
  const top = w.findings.length; // a row per finding above the lanes
  const rows = [
    ...w.findings.map((fd) => (fd.subject ? `${fd.id} · ${fd.subject}` : fd.id)),
    ...t.lanes.map((l) => l.name),
  ];
  const c = chart(el, {
    animation: false,
    // a fixed gutter for the row names, so that two timelines stacked in Compare share one x axis
    grid: { left: LABEL_PX + 12, right: 16, top: 34, bottom: 58 },
    legend: { top: 0, type: 'scroll', icon: 'roundRect', itemWidth: 12, itemHeight: 10, textStyle: { color: UI.text } },
    tooltip: { ...tooltipBase, trigger: 'item', formatter: tooltipOf(w, t, of) },
    xAxis: {
      type: 'value',
      min: 0,
      max: opts.xMax ?? t.dur_us / 1000,
      name: "ms from the step's start",
      nameLocation: 'middle',
      nameGap: 22,
      axisLabel: { color: UI.dim, showMaxLabel: false, formatter: (v: number) => f.count(v) },
      splitLine: { lineStyle: { color: UI.lineSoft } },
    },
    yAxis: {
      type: 'category',
      inverse: true,
      data: rows,
      axisTick: { show: false },
      axisLabel: { color: UI.text, width: LABEL_PX, overflow: 'truncate' },
    },
    dataZoom: [
      { type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter' },
      { type: 'slider', xAxisIndex: 0, filterMode: 'weakFilter', height: 16, bottom: 4 },
    ],
    series: [
      ...intervalSeries(t, top, opts.shade ?? (() => false)),
      ...pathSeries(t, top),
      markSeries(w, t, of, top, rendered),
    ],
  });
  c.on('click', (p: { seriesName?: string; data?: unknown }) => {
    if (p.seriesName === MARKS && Array.isArray(p.data)) {
      const i = of[p.data[3] as number];
      if (i >= 0) (opts.onMark ?? ((j: number) => openFinding(el, j)))(i);
    }
  });
  // what was drawn, for the page's tests: the marks, the first one's flag, the zoom
  c.on('finished', () => {
    el.dataset.renderedMarks = String(rendered.size);
    const first = Math.min(...rendered.keys());
    const at = rendered.get(first);
    if (at) el.dataset.firstMark = `${Math.round(at[0])},${Math.round(at[1])},${of[first]}`;
  });
  c.on('datazoom', () => {
    const z = (c.getOption() as { dataZoom?: { startValue?: number; endValue?: number }[] }).dataZoom?.[0];
    el.dataset.zoom = `${z?.startValue ?? ''},${z?.endValue ?? ''}`;
  });
  el.dataset.intervals = String(t.intervals.lane.length);
  el.dataset.marks = String(t.marks.length);
  return c;
}

/** The chart's height: a row per finding and per lane, and the axes. */
export function timelineHeight(w: WorkerReport, t: Timeline): number {
  return Math.max(180, (t.lanes.length + w.findings.length) * ROW_PX + 110);
}

/** Zooms ``c`` onto ``[start, end]`` µs of the step, with some room around it. */
function zoomTo(c: echarts.ECharts, t: Timeline, start: number, end: number): void {
  const pad = Math.max((end - start) * 2, t.dur_us / 200);
  c.dispatchAction({
    type: 'dataZoom',
    startValue: Math.max(0, start - pad) / 1000,
    endValue: Math.min(t.dur_us, end + pad) / 1000,
  });
}

function chips(w: WorkerReport, t: Timeline, show: (i: number) => void): HTMLElement {
  const of = markFindings(w, t);
  return h(
    'div',
    { class: 'stack-legend', testid: 'timeline-marks' },
    w.findings.map((fd, i) => {
      const n = of.filter((x) => x === i).length;
      // in words (the finding's title), cut by the box with its whole text in the tooltip
      const label = fd.title;
      return h(
        'button',
        {
          class: 'leg iconbtn chip-mark',
          testid: 'timeline-mark',
          data: { finding: String(i), id: fd.id, marks: String(n) },
          title: n ? `${n} mark${n === 1 ? '' : 's'} on this step: click to zoom to the next` : 'no mark',
          on: { click: () => show(i) },
        },
        h('span', { class: 'dot', style: { background: SEVERITY[fd.severity] } }),
        h('span', { class: 'leg-label may-overflow', title: label }, label),
        h('span', { class: 'leg-val' }, String(n)),
      );
    }),
  );
}

function toggle(label: string, testid: string, checked: boolean, on: (v: boolean) => void): HTMLElement {
  return h(
    'label',
    { class: 'dim small', testid },
    h('input', {
      props: { type: 'checkbox', checked },
      on: { change: (ev) => on((ev.target as HTMLInputElement).checked) },
    }),
    ` ${label}`,
  );
}

export function timelineCard(w: WorkerReport): TimelineView | null {
  const t = w.timeline;
  if (!t) return null;
  const el = h('div', {
    class: 'chart',
    testid: 'timeline-chart',
    style: { height: `${timelineHeight(w, t)}px` },
  });
  let c: echarts.ECharts | null = null;
  let shade = false;
  let pathShown = true;
  const next = new Map<number, number>(); // finding -> its next mark to show
  const of = markFindings(w, t);
  const show = (i: number) => {
    const mine = t.marks.filter((_, k) => of[k] === i);
    if (!mine.length || !c) return;
    const k = (next.get(i) ?? 0) % mine.length;
    next.set(i, k + 1);
    el.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    zoomTo(c, t, mine[k].start_us, mine[k].start_us + mine[k].dur_us);
  };
  const draw = () => {
    const zoom = (c?.getOption() as { dataZoom?: { startValue?: number; endValue?: number }[] } | undefined)
      ?.dataZoom?.[0];
    disposeCharts(el);
    c = drawTimeline(el, w, t, { shade: () => shade });
    if (zoom?.startValue !== undefined)
      c.dispatchAction({ type: 'dataZoom', startValue: zoom.startValue, endValue: zoom.endValue });
    if (!pathShown) c.dispatchAction({ type: 'legendUnSelect', name: PATH });
  };
  queueMicrotask(draw);
  const controls = h(
    'span',
    { class: 'pickers' },
    toggle('critical path', 'timeline-critical', true, (v) => {
      pathShown = v;
      c?.dispatchAction({ type: v ? 'legendSelect' : 'legendUnSelect', name: PATH });
    }),
    toggle('shade by SM efficiency', 'timeline-shade', false, (v) => {
      shade = v;
      draw(); // the custom series paint once: shading anew is drawing anew, at the same zoom
    }),
  );
  const binned =
    t.bin_us !== null
      ? [
          `Events shorter than ${f.dur(t.bin_us)} are merged into bins (count and time kept): ${f.count(t.events, 0)} events in this step.`,
        ]
      : [];
  const body = [h('p', { class: 'explain' }, t.why), el, chips(w, t, show), cardNotes([...binned, ...t.notes])];
  const root = card(`Timeline · ${t.why.startsWith('ProfilerStep') ? `ProfilerStep#${t.step}` : 'the trace'}`, body, {
    testid: 'timeline',
    extra: controls,
    help: 'One step as the trace has it: host threads, GPU streams, copies and GPU idle, with the critical path under the work it runs through and the findings marked (top row, and outlined on their lanes). Wheel to zoom, drag to pan; click a mark to open its finding.',
  });
  return { el: root, show };
}

/** Adds a "Show on timeline" button to each finding of the Findings card ``findings``. */
export function linkFindings(findings: HTMLElement, view: TimelineView | null): void {
  if (!view) return;
  for (const li of Array.from(findings.querySelectorAll<HTMLElement>('li.finding[data-index]'))) {
    const i = Number(li.dataset.index);
    const meta = li.querySelector('.finding-meta') ?? li;
    meta.appendChild(
      h('button', { class: 'link', testid: 'show-on-timeline', on: { click: () => view.show(i) } }, 'Show on timeline'),
    );
  }
}
