// How Compare shows a figure's change: the rows, their values, deltas and verdicts come from the
// /compare body (analysis/run/compare.py: FigureDelta, per pair of workers); this module words and
// colours them, and computes nothing.
import { AGGREGATION, DEFINITIONS, type Figure } from './definitions';
import { type Child, h } from './dom';
import * as f from './format';
import type { FigureDelta, WorkerDeltas } from './report_types';
import type { WorkerReport } from './types';

// the analysis withheld an MFU above 100 % (summary.mfu_status): no figure, nor a FLOP/s derived from it
export const impossible = (w: WorkerReport) => w.summary?.mfu_status?.state === 'impossible';

/** The figures whose shares are time-weighted over the analysed steps: their tooltip says so. */
const OVER_STEPS = new Set<string>([
  'gpu_busy_share',
  'kernel_time_share',
  'sm_efficiency',
  'breakdown.memcpy',
  'idle_share',
  'gpu_idle_after_sync_share',
  'host_sync_blocked_share',
]);

const definitionOf = (d: FigureDelta) => DEFINITIONS[d.figure as Figure];

/** A row's head: the figure's label, its definition as the tooltip. */
export function figureHead(d: FigureDelta): HTMLElement {
  const name = d.figure as Figure;
  const title = `${f.definition(name)}${OVER_STEPS.has(d.figure) ? ` (${AGGREGATION})` : ''}`;
  return h('th', { class: 'metric', title }, f.label(name));
}

/** A worker's figure as its column shows it: "impossible" for an MFU (or the FLOP/s from it)
 * that the analysis withheld, else its unit's text. */
export function figureText(d: FigureDelta, w: WorkerReport): string {
  if (d.value == null && impossible(w) && (d.figure === 'mfu' || d.figure === 'achieved_flops')) return 'impossible';
  return f.figure(d.figure as Figure, d.value);
}

const VERDICT_CLASS: Record<FigureDelta['verdict'], string> = {
  better: 'good',
  worse: 'bad',
  same: 'neutral',
  none: 'neutral',
  unknown: 'neutral',
};

/** The change against the baseline, green or red where the analysis judged it better or worse. */
export function deltaNode(d: FigureDelta, field?: string): Child {
  const text = f.change(d.delta, d.delta_unit);
  if (!text) return null;
  const better = definitionOf(d)?.better ?? 'none';
  const title =
    better === 'none'
      ? 'not judged: this figure explains the step time and MFU, it is no goal in itself'
      : `${better} is better${d.verdict === 'same' ? ': within the noise' : ''}`;
  return h('span', { class: `delta ${VERDICT_CLASS[d.verdict]}`, title, data: field ? { field } : undefined }, text);
}

/** In the /compare body's ``deltas``, ``run``'s worker ``worker`` against ``baseline``'s worker
 * ``baselineWorker`` (the same run and worker: its own figures), with its index there. */
export function pairOf(
  deltas: WorkerDeltas[],
  run: string,
  worker: number,
  baseline: string,
  baselineWorker: number,
): { pair: WorkerDeltas; index: number } | null {
  const index = deltas.findIndex(
    (x) => x.run === run && x.worker === worker && x.baseline_run === baseline && x.baseline_worker === baselineWorker,
  );
  return index < 0 ? null : { pair: deltas[index], index };
}
