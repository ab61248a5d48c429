// Compare's timelines: the representative step of each of the first two runs, one above the
// other on one time scale (the longer step's), zoomed and panned together.
import * as echarts from 'echarts/core';
import { card } from './card';
import { h } from './dom';
import { drawTimeline, timelineHeight } from './timeline';
import type { WorkerReport } from './types';

export interface Side {
  run: string;
  worker: WorkerReport;
}

export function compareTimelines(sides: Side[]): HTMLElement | null {
  const drawn = sides.filter((s) => s.worker.timeline).slice(0, 2);
  if (drawn.length < 2) return null;
  const xMax = Math.max(...drawn.map((s) => (s.worker.timeline?.dur_us ?? 0) / 1000));
  const els = drawn.map((s) => {
    const t = s.worker.timeline;
    return h('div', {
      class: 'chart',
      testid: 'compare-timeline-chart',
      style: { height: `${t ? timelineHeight(s.worker, t) : 180}px` },
    });
  });
  queueMicrotask(() => {
    const charts = drawn.map((s, i) =>
      drawTimeline(els[i], s.worker, s.worker.timeline as NonNullable<WorkerReport['timeline']>, { xMax }),
    );
    echarts.connect(charts); // one zoom, one pan, for both
  });
  return card(
    'Timelines, on one time scale',
    drawn.map((s, i) => [
      h('p', { class: 'explain' }, h('strong', null, s.run), ` · ${s.worker.timeline?.why ?? ''}`),
      els[i],
    ]),
    {
      testid: 'compare-timelines',
      cls: 'wide',
      help: "Each run's representative step, from its start, on the same axis: the longer step sets the scale. Zooming or panning one moves both.",
    },
  );
}
