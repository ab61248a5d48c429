// The worker reports of one run: which can be shown, and how the pickers name them.
import * as f from './format';
import type { RunReport, WorkerReport } from './types';

/** Indices of the reports with a summary and no error. */
export function usable(r: RunReport): number[] {
  return r.workers.map((w, i) => (w.summary && !w.error ? i : -1)).filter((i) => i >= 0);
}

/** "worker · GPU 0 · span 2/3 (date)": the span part only when the worker has several spans. */
export function workerLabel(w: WorkerReport, r: RunReport): string {
  const spans = Array.from(new Set(r.workers.filter((x) => x.name === w.name).map((x) => x.span)));
  const dev = w.device?.index !== null && w.device?.index !== undefined ? ` · GPU ${w.device.index}` : '';
  const span = spans.length > 1 ? ` · span ${spans.indexOf(w.span) + 1}/${spans.length} (${f.spanLabel(w.span)})` : '';
  return `${w.name}${dev}${span}${w.error ? ' — error' : ''}`;
}
