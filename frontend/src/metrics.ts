// What Compare compares: each metric of a worker report with its format, how its delta
// reads (percentage points for shares, relative change otherwise) and which way is better.
import { AGGREGATION, DEFINITIONS, type Figure } from './definitions';
import { type Child, h } from './dom';
import * as f from './format';
import type { Summary, WorkerReport } from './types';

type Better = 'higher' | 'lower';

/** Which way is better, for the few rows that say how fast a run is, or how much memory it
 * needs: the step time and MFU (and the achieved FLOP/s, MFU before dividing by the peak).
 * Compare colours their deltas green or red. Every other row explains them (GPU busy, SM
 * efficiency, idle, syncs, launches...) and its delta stays grey: a busier GPU is not a faster
 * step ("busy is not fast"), and a run can get busier while it gets slower. */
export const BETTER: Partial<Record<Figure, Better>> = {
  mfu: 'higher',
  achieved_flops: 'higher',
  step_time_us: 'lower',
  'memory.peak_allocated_bytes': 'lower',
  'memory.peak_reserved_bytes': 'lower',
  'memory.headroom.batch_factor': 'higher',
};

export interface MetricRow {
  name: Figure;
  label: string;
  title: string;
  value: (s: Summary, w: WorkerReport) => number | null | undefined;
  fmt: (x: number | null | undefined) => string;
  delta: 'pp' | 'rel';
  better: Better | null; // null: the delta is shown, not judged
}

// the analysis withheld an MFU above 100 % (summary.mfu_status): no figure, nor a FLOP/s derived from it
export const impossible = (w: WorkerReport) => w.summary?.mfu_status?.state === 'impossible';

type Value = MetricRow['value'];

/** A figure of the definitions: its label, definition and unit's formatter from the one table
 * (definitions.ts); a share's delta in percentage points, any other's a relative change. */
function metric(name: Figure, value: Value, qualifier = ''): MetricRow {
  const unit = DEFINITIONS[name].unit;
  return {
    name,
    label: f.label(name),
    title: `${f.definition(name)}${qualifier}`,
    value,
    fmt: (x) => f.figure(name, x),
    delta: unit === 'share' ? 'pp' : 'rel',
    better: BETTER[name] ?? null,
  };
}

const OVER_STEPS = ` (${AGGREGATION})`;

export const METRICS: MetricRow[] = [
  metric('mfu', (s) => s.mfu),
  metric('achieved_flops', (s) => s.achieved_flops),
  metric('step_time_us', (s) => s.step_time_us),
  metric('gpu_busy_share', (s) => s.gpu_busy_share, OVER_STEPS),
  metric('kernel_time_share', (s) => s.kernel_time_share, OVER_STEPS),
  metric('sm_efficiency', (s) => s.sm_efficiency, OVER_STEPS),
  metric('achieved_occupancy', (s) => s.achieved_occupancy),
  metric('tensor_core_kernel_share', (s) => s.tensor_core_kernel_share),
  metric('breakdown.memcpy', (s) => s.breakdown?.memcpy, OVER_STEPS),
  metric('idle_share', (s) => s.idle_share, OVER_STEPS),
  metric('gpu_idle_after_sync_share', (s) => s.gpu_idle_after_sync_share, OVER_STEPS),
  metric('host_sync_blocked_share', (s) => s.host_sync_blocked_share, OVER_STEPS),
  metric('flops_per_step', (s) => s.flops_per_step),
  metric('kernels_per_step', (s) => s.kernels_per_step),
  metric('launches.short_kernel_share', (_s, w) => w.launches?.short_kernel_share),
  metric('launches.launch_api_us_per_step', (_s, w) => w.launches?.launch_api_us_per_step),
  metric('launches.graph_launches_per_step', (_s, w) => w.launches?.graph_launches_per_step),
  metric('launches.graph_kernels_per_step', (_s, w) => w.launches?.graph_kernels_per_step),
  metric('sync_count_per_step', (s) => s.sync_count_per_step),
  metric('h2d_bytes_per_step', (s) => s.h2d_bytes_per_step),
  metric('d2h_bytes_per_step', (s) => s.d2h_bytes_per_step),
  // profile_memory=True traces (WorkerReport.memory): the peak, and what it leaves for a larger batch
  metric('memory.peak_allocated_bytes', (_s, w) => w.memory?.peak_allocated_bytes),
  metric('memory.peak_reserved_bytes', (_s, w) => w.memory?.peak_reserved_bytes),
  metric('memory.headroom.batch_factor', (_s, w) => w.memory?.headroom?.batch_factor),
  metric('memory.recompute.us_per_step', (_s, w) => w.memory?.recompute?.us_per_step),
];

export function deltaNode(m: MetricRow, base: number | null | undefined, v: number | null | undefined): Child {
  if (!f.isNumber(base) || !f.isNumber(v)) return null;
  const text = m.delta === 'pp' ? f.ppDelta(base, v) : f.relDelta(base, v);
  if (!text) return null;
  const diff = v - base;
  const tiny = m.delta === 'pp' ? Math.abs(diff) < 0.005 : Math.abs(diff) / Math.max(Math.abs(base), 1e-12) < 0.02; // noise
  let cls = 'neutral';
  if (!tiny && m.better) cls = diff > 0 === (m.better === 'higher') ? 'good' : 'bad';
  const title = m.better
    ? `${m.better} is better`
    : 'not judged: this figure explains the step time and MFU, it is no goal in itself';
  return h('span', { class: `delta ${cls}`, title }, text);
}
