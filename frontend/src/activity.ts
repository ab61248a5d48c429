// What ran in the analysed steps, per step: copies, host-device syncs, kernel launches and
// the top kernels, each as a card with a sortable table or a list of facts.
import { card } from './card';
import { h, ICONS, icon } from './dom';
import * as f from './format';
import { type Column, kernelFilter, kernelNameColumn, numColumn, shareCell, table } from './table';
import type { CopyStats, KernelStats, SyncStats, WorkerReport } from './types';

const COPY_COLUMNS: Column<CopyStats>[] = [
  {
    key: 'direction',
    label: 'Direction',
    value: (c) => c.direction,
    cell: (c) => h('span', { class: `pill dir-${c.direction.toLowerCase()}` }, c.direction),
  },
  {
    key: 'memory',
    label: 'Host memory',
    value: (c) => c.memory,
    title: 'The host side of the copy: pageable copies are slower and synchronous',
  },
  numColumn('count', 'Count / step', (c) => c.count_per_step, f.count),
  numColumn('bytes', 'Bytes / step', (c) => c.bytes_per_step, f.bytes),
  numColumn('time', 'Time / step', (c) => c.time_us_per_step, f.dur),
  numColumn('gbps', 'Bandwidth', (c) => c.gbps, f.gbps, 'Achieved while copying, GB/s (1e9 bytes/s)'),
  numColumn('small', '< 64 KiB', (c) => c.small_count_per_step, f.count, 'Small copies per step (latency-bound)'),
];

export function copiesCard(w: WorkerReport): HTMLElement {
  const copies = w.copies ?? [];
  return card(
    'Copies',
    table<CopyStats>(copies, COPY_COLUMNS, {
      testid: 'copies-table',
      cls: 'wrap-heads',
      sortKey: 'time',
      empty: 'No copies in the profiled steps.',
    }),
    { help: 'Memcpy by direction and host memory kind, per step.' },
  );
}

export function syncsCard(w: WorkerReport): HTMLElement {
  const syncs = w.syncs ?? [];
  return card(
    'Sync points',
    table<SyncStats>(
      syncs,
      [
        {
          key: 'root',
          label: 'Caused by',
          value: (s) => s.root_op ?? s.op ?? '',
          cell: (s) => h('span', { class: 'mono' }, s.root_op ?? s.op ?? f.NA),
          title: 'The outermost op in the step around the synchronising call',
        },
        {
          key: 'op',
          label: 'Inner op',
          value: (s) => s.op ?? '',
          cell: (s) => h('span', { class: 'mono dim' }, s.op ?? f.NA),
        },
        { key: 'api', label: 'API', value: (s) => s.api, cell: (s) => h('span', { class: 'mono' }, s.api) },
        numColumn('count', 'Count / step', (s) => s.count_per_step, f.count),
        numColumn(
          'blocked',
          'Blocked / step',
          (s) => s.blocked_us_per_step,
          f.dur,
          'Host time blocked in the call, per step',
        ),
      ],
      {
        testid: 'syncs-table',
        cls: 'wrap-heads',
        sortKey: 'blocked',
        empty: 'No host-device synchronisation in the profiled steps.',
      },
    ),
    { help: 'Calls where the host waits for the GPU, grouped by the op that issued them.' },
  );
}

export function launchesCard(w: WorkerReport): HTMLElement {
  const l = w.launches;
  if (!l) return card('Launches', h('p', { class: 'muted' }, 'No launch statistics.'));
  const rows: [string, string, string][] = [
    ['Kernels / step', f.count(l.kernels_per_step, 0), 'Kernels that started inside the profiled steps'],
    ['Median kernel', f.dur(l.median_kernel_us), 'Median kernel duration'],
    ['Short kernels', f.pct(l.short_kernel_share), 'Share of kernels under 10 µs: launch-bound if many'],
    [
      'Launch API / step',
      f.dur(l.launch_api_us_per_step),
      'Host time in kernel launch calls, runtime and driver API (cudaLaunchKernel, cuLaunchKernel, …), graph launches apart',
    ],
    ['Idle gaps / step', f.count(l.idle_gaps.count_per_step, 0), 'Gaps between GPU activities'],
    ['Idle in gaps / step', f.dur(l.idle_gaps.total_us_per_step), 'Total GPU idle time in those gaps'],
    ['Median · max gap', `${f.dur(l.idle_gaps.median_us)} · ${f.dur(l.idle_gaps.max_us)}`, ''],
  ];
  const replays = l.graph_launches_per_step ?? 0;
  if (replays > 0) {
    const inGraphs = l.graph_kernels_per_step ?? 0;
    rows.push(
      [
        'CUDA graph replays / step',
        f.count(replays, 1),
        'cudaGraphLaunch / hipGraphLaunch calls: one launch replays a whole captured graph',
      ],
      ['Graph launch API / step', f.dur(l.graph_launch_api_us_per_step ?? 0), 'Host time in those graph launch calls'],
      [
        'Kernels in graphs / step',
        `${f.count(inGraphs, 0)} (median ${f.dur(l.graph_median_kernel_us)})`,
        'Kernels the graph replays ran; the host did not launch them one by one',
      ],
      [
        'Launched one by one / step',
        f.count(l.kernels_launched_one_by_one_per_step, 0),
        'Kernels the host launched itself, outside graph replays',
      ],
    );
  }
  const help =
    replays > 0
      ? 'This run replays CUDA graphs: the gaps between their kernels are not host launch overhead. Fewer, fused kernels (torch.compile) are the lever there; kernels launched one by one can still be launch-bound.'
      : 'Many short kernels with gaps between them mean the host cannot feed the GPU: consider CUDA graphs or torch.compile.';
  return card(
    'Launches',
    h(
      'dl',
      { class: 'facts', testid: 'launch-stats' },
      rows.map(([k, v, t]) => [h('dt', { title: t }, k), h('dd', null, v)]),
    ),
    {
      help,
    },
  );
}

/** The top kernels' columns; a share's bar is as long as its part of ``maxShare``. */
function kernelColumns(maxShare: number): Column<KernelStats>[] {
  return [
    kernelNameColumn(),
    numColumn('count', 'Calls', (k) => k.count, f.count),
    numColumn('total', 'Total', (k) => k.total_us, f.dur, 'Total time in the analysed steps'),
    {
      key: 'share',
      label: 'Share',
      num: true,
      value: (k) => k.share,
      cell: (k) => shareCell(k.share, maxShare),
      title: 'Share of all kernel time',
    },
    numColumn('mean', 'Mean', (k) => k.mean_us, f.dur),
    numColumn(
      'bps',
      'Blocks / SM',
      (k) => k.mean_blocks_per_sm,
      f.counter(2),
      'Mean blocks per SM: under 1 leaves SMs empty',
    ),
    numColumn('sm', 'SM eff.', (k) => k.sm_efficiency, f.pct),
    numColumn(
      'occ',
      'Occupancy',
      (k) => k.achieved_occupancy,
      f.pct,
      'Estimated achieved occupancy; n/a where the profiler could not estimate it (e.g. Hopper nvjet GEMMs)',
    ),
    {
      key: 'tc',
      label: 'Unit',
      value: (k) => k.core ?? (k.tensor_core ? 'tensor-core' : ''),
      cell: (k) => unitCell(k),
    },
  ];
}

export function kernelsCard(w: WorkerReport): HTMLElement {
  const ks = w.top_kernels ?? [];
  const maxShare = Math.max(1e-9, ...ks.map((k) => k.share));
  return card(
    `Top kernels`,
    table<KernelStats>(ks, kernelColumns(maxShare), {
      testid: 'kernels-table',
      sortKey: 'total',
      maxRows: 15,
      ...kernelFilter,
      empty: 'No kernels.',
    }),
    { help: 'Kernels by total time in the analysed steps. Click a column to sort.', cls: 'wide' },
  );
}

const UNIT_LABEL: Record<string, string> = {
  'tensor-core': 'tensor core',
  'cuda-core': 'CUDA core',
  unknown: 'unknown',
};

/** Which unit a kernel's math runs on (the family table), with the dtype its name gives. */
function unitCell(k: KernelStats): HTMLElement {
  const core = k.core ?? (k.tensor_core ? 'tensor-core' : 'not-a-matmul');
  const label = UNIT_LABEL[core];
  if (!label) return h('span', { class: 'dim', title: 'Not a matmul: no math unit to name' }, f.NA);
  const text = k.dtype ? `${label} · ${k.dtype}` : label;
  if (core === 'tensor-core') return h('span', { class: 'yes' }, icon(ICONS.check, 12), text);
  return h(
    'span',
    {
      class: core === 'unknown' ? 'dim' : '',
      title: core === 'unknown' ? 'A GEMM-like kernel no family of the table names: its unit is not known' : '',
    },
    text,
  );
}
