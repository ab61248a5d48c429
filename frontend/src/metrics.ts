// What Compare compares: each metric of a worker report with its format, how its delta
// reads (percentage points for shares, relative change otherwise) and which way is better.
import { type Child, h } from './dom';
import * as f from './format';
import type { Summary, WorkerReport } from './types';

type Better = 'higher' | 'lower' | 'neutral';

export interface MetricRow {
  label: string;
  title: string;
  value: (s: Summary, w: WorkerReport) => number | null | undefined;
  fmt: (x: number | null | undefined) => string;
  delta: 'pp' | 'rel';
  better: Better;
}

// analysis/plausibility.py withheld an MFU above 100 %: no figure, nor a FLOP/s derived from it
export const impossible = (w: WorkerReport) => (w.flags ?? []).includes('impossible_mfu');

type Value = MetricRow['value'];

/** A share of the step (or of kernel time): a percentage, its delta in percentage points. */
function share(label: string, title: string, value: Value, better: Better): MetricRow {
  return { label, title, value, fmt: (x) => f.pct(x), delta: 'pp', better };
}

/** Any other figure: shown by ``fmt``, its delta a relative change. */
function figure(label: string, title: string, value: Value, fmt: MetricRow['fmt'], better: Better): MetricRow {
  return { label, title, value, fmt, delta: 'rel', better };
}

export const METRICS: MetricRow[] = [
  share('MFU', 'Model FLOPs utilisation: all FLOPs of the analysed steps over all their time', (s) => s.mfu, 'higher'),
  figure('Achieved', 'Useful FLOP/s over the step', (s) => s.achieved_flops, f.tflops, 'higher'),
  figure(
    'Median step time',
    'Median step time (the shares are time-weighted over all steps)',
    (s) => s.step_time_us,
    (x) => f.ms(x),
    'lower',
  ),
  share('GPU busy', 'Any GPU activity', (s) => s.gpu_busy_share, 'higher'),
  share('Kernel time', 'Any kernel running', (s) => s.kernel_time_share, 'higher'),
  share('SM efficiency', 'SMs filled by the kernels, time-weighted', (s) => s.sm_efficiency, 'higher'),
  share('Occupancy', 'Estimated achieved occupancy, kernel-time weighted', (s) => s.achieved_occupancy, 'higher'),
  share('Tensor-core kernels', 'Share of kernel time on tensor cores', (s) => s.tensor_core_kernel_share, 'higher'),
  share('Memcpy only', 'Step share copying with no kernel running', (s) => s.breakdown?.memcpy, 'lower'),
  share(
    'Sync wait',
    'Step share with the GPU idle while the host waits in a sync',
    (s) => s.breakdown?.sync_wait ?? s.sync_wait_share,
    'lower',
  ),
  share('Idle', 'Step share with the GPU idle', (s) => s.idle_share, 'lower'),
  figure('FLOPs / step', 'Useful FLOPs per step', (s) => s.flops_per_step, f.flops, 'neutral'),
  figure('Kernels / step', 'Kernel launches per step', (s) => s.kernels_per_step, f.counter(0), 'lower'),
  share('Short kernels', 'Share of kernels under 10 µs', (_s, w) => w.launches?.short_kernel_share, 'lower'),
  figure(
    'Launch API / step',
    'Host time in launch calls',
    (_s, w) => w.launches?.launch_api_us_per_step,
    f.dur,
    'lower',
  ),
  figure(
    'Graph replays / step',
    'CUDA/HIP graph launches per step: each replays a whole captured graph',
    (_s, w) => w.launches?.graph_launches_per_step,
    f.counter(1),
    'neutral',
  ),
  figure(
    'Kernels in graphs',
    'Kernels per step run by graph replays, not launched one by one by the host',
    (_s, w) => w.launches?.graph_kernels_per_step,
    f.counter(0),
    'neutral',
  ),
  figure('Syncs / step', 'Host-device synchronisations per step', (s) => s.sync_count_per_step, f.counter(), 'lower'),
  figure('H2D / step', 'Host to device bytes per step', (s) => s.h2d_bytes_per_step, f.bytes, 'neutral'),
  figure('D2H / step', 'Device to host bytes per step', (s) => s.d2h_bytes_per_step, f.bytes, 'lower'),
];

export function deltaNode(m: MetricRow, base: number | null | undefined, v: number | null | undefined): Child {
  if (!f.isNumber(base) || !f.isNumber(v)) return null;
  const text = m.delta === 'pp' ? f.ppDelta(base, v) : f.relDelta(base, v);
  if (!text) return null;
  const diff = v - base;
  const tiny = m.delta === 'pp' ? Math.abs(diff) < 0.005 : Math.abs(diff) / Math.max(Math.abs(base), 1e-12) < 0.02; // noise
  let cls = 'neutral';
  if (!tiny && m.better !== 'neutral') cls = diff > 0 === (m.better === 'higher') ? 'good' : 'bad';
  return h('span', { class: `delta ${tiny ? 'neutral' : cls}` }, text);
}
