// What Compare compares: each metric of a worker report with its format, how its delta
// reads (percentage points for shares, relative change otherwise) and which way is better.
import { type Child, h } from './dom';
import * as f from './format';
import { meanStep } from './steps';
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

const achieved = (s: Summary, w: WorkerReport) => {
  if (impossible(w)) return null;
  return f.isNumber(s.flops_per_step) && meanStep(s) > 0 ? s.flops_per_step / (meanStep(s) / 1e6) : null;
};

export const METRICS: MetricRow[] = [
  {
    label: 'MFU',
    title: 'Model FLOPs utilisation: all FLOPs of the analysed steps over all their time',
    value: (s) => s.mfu,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'higher',
  },
  {
    label: 'Achieved',
    title: 'Useful FLOP/s over the step',
    value: achieved,
    fmt: f.tflops,
    delta: 'rel',
    better: 'higher',
  },
  {
    label: 'Median step time',
    title: 'Median step time (the shares are time-weighted over all steps)',
    value: (s) => s.step_time_us,
    fmt: (x) => f.ms(x),
    delta: 'rel',
    better: 'lower',
  },
  {
    label: 'GPU busy',
    title: 'Any GPU activity',
    value: (s) => s.gpu_busy_share,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'higher',
  },
  {
    label: 'Kernel time',
    title: 'Any kernel running',
    value: (s) => s.kernel_time_share,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'higher',
  },
  {
    label: 'SM efficiency',
    title: 'SMs filled by the kernels, time-weighted',
    value: (s) => s.sm_efficiency,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'higher',
  },
  {
    label: 'Occupancy',
    title: 'Estimated achieved occupancy, kernel-time weighted',
    value: (s) => s.achieved_occupancy,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'higher',
  },
  {
    label: 'Tensor-core kernels',
    title: 'Share of kernel time on tensor cores',
    value: (s) => s.tensor_core_kernel_share,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'higher',
  },
  {
    label: 'Memcpy only',
    title: 'Step share copying with no kernel running',
    value: (s) => s.breakdown?.memcpy,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'lower',
  },
  {
    label: 'Sync wait',
    title: 'Step share with the GPU idle while the host waits in a sync',
    value: (s) => s.breakdown?.sync_wait ?? s.sync_wait_share,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'lower',
  },
  {
    label: 'Idle',
    title: 'Step share with the GPU idle',
    value: (s) => s.idle_share,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'lower',
  },
  {
    label: 'FLOPs / step',
    title: 'Useful FLOPs per step',
    value: (s) => s.flops_per_step,
    fmt: f.flops,
    delta: 'rel',
    better: 'neutral',
  },
  {
    label: 'Kernels / step',
    title: 'Kernel launches per step',
    value: (s) => s.kernels_per_step,
    fmt: (x) => f.count(x, 0),
    delta: 'rel',
    better: 'lower',
  },
  {
    label: 'Short kernels',
    title: 'Share of kernels under 10 µs',
    value: (_s, w) => w.launches?.short_kernel_share,
    fmt: (x) => f.pct(x),
    delta: 'pp',
    better: 'lower',
  },
  {
    label: 'Launch API / step',
    title: 'Host time in launch calls',
    value: (_s, w) => w.launches?.launch_api_us_per_step,
    fmt: f.dur,
    delta: 'rel',
    better: 'lower',
  },
  {
    label: 'Graph replays / step',
    title: 'CUDA/HIP graph launches per step: each replays a whole captured graph',
    value: (_s, w) => w.launches?.graph_launches_per_step,
    fmt: (x) => f.count(x, 1),
    delta: 'rel',
    better: 'neutral',
  },
  {
    label: 'Kernels in graphs',
    title: 'Kernels per step run by graph replays, not launched one by one by the host',
    value: (_s, w) => w.launches?.graph_kernels_per_step,
    fmt: (x) => f.count(x, 0),
    delta: 'rel',
    better: 'neutral',
  },
  {
    label: 'Syncs / step',
    title: 'Host-device synchronisations per step',
    value: (s) => s.sync_count_per_step,
    fmt: (x) => f.count(x),
    delta: 'rel',
    better: 'lower',
  },
  {
    label: 'H2D / step',
    title: 'Host to device bytes per step',
    value: (s) => s.h2d_bytes_per_step,
    fmt: f.bytes,
    delta: 'rel',
    better: 'neutral',
  },
  {
    label: 'D2H / step',
    title: 'Device to host bytes per step',
    value: (s) => s.d2h_bytes_per_step,
    fmt: f.bytes,
    delta: 'rel',
    better: 'lower',
  },
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
