// Mirrors tb_mfu_plugin/analysis/report.py (the --json contract) and the plugin's /runs body.
// Units: time in µs, shares as fractions 0-1, bytes, FLOPs and FLOP/s as numbers.

export interface Metrics {
  gpu_busy_share: number;
  kernel_time_share: number;
  memcpy_time_share: number;
  memset_time_share: number;
  idle_share: number;
  sync_wait_share: number;
  sm_efficiency: number | null;
  achieved_occupancy: number | null;
  tensor_core_kernel_share: number;
  // GEMM-like kernels no family of analysis/kernel_families.py names, and CUDA-core matmul/conv kernels
  unknown_core_kernel_share?: number;
  cuda_core_matmul_kernel_share?: number;
  h2d_bytes_per_step: number;
  d2h_bytes_per_step: number;
  d2d_bytes_per_step: number;
  p2p_bytes_per_step: number;
  sync_count_per_step: number;
  kernels_per_step: number;
  flops_per_step?: number | null;
  mfu?: number | null;
}

export interface Step extends Metrics {
  step: number;
  start_us: number;
  dur_us: number;
  // Fractions of the step summing to 1: kernel, memcpy, memset, sync_wait, idle.
  breakdown?: Record<string, number>;
}

/** How one per-step figure varies over the analysed steps (numpy.percentile, linear). */
export interface Spread {
  median: number;
  p10: number;
  p90: number;
  min: number;
  max: number;
}

/** The analysed steps as one: shares time-weighted (ratio of sums), counts per mean step. */
export interface Summary extends Metrics {
  steps: number;
  step_time_us: number; // the MEDIAN step
  breakdown?: Record<string, number>; // time-weighted, sums to 1
  step_time_median_us?: number | null;
  step_time_mean_us?: number | null; // the step the shares apply to
  distribution?: Record<string, Spread>;
}

export interface Device {
  index: number | null;
  name: string | null;
  num_sms?: number | null;
  compute_capability?: string | null;
  peak_flops?: number | null;
  peak_source?: string | null;
  dtype?: string | null;
  properties_match?: string | null;
}

export interface CopyStats {
  direction: string;
  memory: string;
  count_per_step: number;
  bytes_per_step: number;
  time_us_per_step: number;
  gbps: number | null;
  small_count_per_step: number;
}

export interface SyncStats {
  api: string;
  op: string | null;
  root_op: string | null;
  count_per_step: number;
  blocked_us_per_step: number;
}

export interface IdleGaps {
  count_per_step: number;
  total_us_per_step: number;
  median_us: number | null;
  max_us: number | null;
}

export interface LaunchStats {
  kernels_per_step: number;
  median_kernel_us: number | null;
  short_kernel_share: number;
  launch_api_us_per_step: number;
  idle_gaps: IdleGaps;
  graph_launches_per_step?: number;
  graph_kernels_per_step?: number;
  graph_median_kernel_us?: number | null;
}

export interface KernelStats {
  name: string;
  count: number;
  total_us: number;
  share: number;
  mean_us: number;
  mean_blocks_per_sm: number | null;
  sm_efficiency: number | null;
  achieved_occupancy: number | null;
  tensor_core: boolean;
  core?: string | null; // tensor-core, cuda-core, not-a-matmul or unknown
  dtype?: string | null; // matmul dtype the name gives (bf16, fp8, tf32...)
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

// ---- the roofline of one worker (analysis/roofline.py) ----
export interface RooflineOp {
  name: string;
  class: string;
  shapes: string;
  dtype: string | null;
  exact: boolean;
  count_per_step: number;
  us_per_step: number;
  flops_per_step: number;
  bytes_per_step: number;
  intensity: number | null;
  achieved_flops: number | null;
  achieved_bandwidth: number | null;
  roof_flops: number | null;
  roof_share: number | null;
  bound: 'memory' | 'compute' | null;
  roof_us_per_step: number | null;
  lost_us_per_step: number | null;
  above_roof: boolean;
  kernels_per_call?: number;
  mean_blocks_per_sm?: number | null;
}

export interface RooflineClass {
  class: string;
  count_per_step: number;
  us_per_step: number;
  flops_per_step: number;
  bytes_per_step: number;
  intensity: number | null;
  achieved_flops: number | null;
  achieved_bandwidth: number | null;
  roof_share: number | null;
  bound: string | null;
  lost_us_per_step: number;
}

export interface RooflineUnmodelled {
  name: string;
  reason: string;
  count_per_step: number;
  us_per_step: number;
}

export interface Roofline {
  peak_flops: number | null;
  peak_bandwidth: number | null;
  ridge_intensity: number | null;
  ops: RooflineOp[];
  ops_left_out: number;
  ops_left_out_us_per_step: number;
  classes: RooflineClass[];
  unmodelled: RooflineUnmodelled[];
  modelled_us_per_step: number;
  unmodelled_us_per_step: number;
  coverage: number | null;
  peak_source?: string | null;
  bandwidth_source?: string | null;
  notes: string[];
}

export interface WorkerReport {
  name: string;
  span: string;
  file: string;
  error?: string | null;
  device?: Device | null;
  summary?: Summary | null;
  steps?: Step[];
  copies?: CopyStats[];
  syncs?: SyncStats[];
  launches?: LaunchStats | null;
  top_kernels?: KernelStats[];
  flops?: JsonObject | null;
  roofline?: Roofline | null;
  findings?: JsonObject[];
  waterfall?: JsonObject[];
  flags?: string[];
  notes?: string[];
  distributed?: JsonObject | null;
  trace_bytes?: number;
}

export interface RankRow {
  worker: string;
  span: string;
  rank: number | null;
  step_time_us: number;
  gpu_busy_share: number;
  idle_share: number;
  exposed_communication_us_per_step: number | null;
  mfu: number | null;
}

export interface RankSummary {
  world_size: number | null;
  ranks: RankRow[];
  straggler: { worker: string; rank: number | null; others_wait_us_per_step: number; reason: string } | null;
}

export interface RunReport {
  name: string;
  workers: WorkerReport[];
  ranks?: RankSummary | null;
}

// ---- /runs ----
export type LoadState = 'queued' | 'loading' | 'done' | 'error' | 'ready' | 'partial';

export interface SpanStatus {
  span: string;
  file: string;
  size: number;
  mtime: number;
  state: LoadState;
  progress: number;
  bytes_read: number;
  bytes_total: number;
  seconds: number | null;
  cached: boolean;
  devices: (number | null)[];
  errors: string[];
}

export interface RunStatus {
  name: string;
  path: string;
  state: LoadState;
  progress: number;
  size: number;
  errors: string[];
  workers: { name: string; spans: SpanStatus[] }[];
}

export interface RunsBody {
  schema_version: number;
  tool_version: string;
  scanned: boolean;
  scanning: boolean;
  sources: { name: string | null; path: string }[];
  errors: string[];
  runs: RunStatus[];
}

export interface CompareEntry {
  name: string;
  state: LoadState;
  progress: number;
  report: RunReport | null;
}

export interface CompareBody {
  schema_version: number;
  runs: CompareEntry[];
}
