// The tab's types. The report's come from report_types.ts, which scripts/gen_ts_types.py
// generates from the msgspec schema of tb_mfu_plugin/analysis/report.py; this file only
// adds what that schema cannot say yet, and the plugin's own /runs and /compare bodies.
// Units: time in µs, shares as fractions 0-1, bytes, FLOPs and FLOP/s as numbers.
import type * as generated from './report_types';

export type {
  Collective,
  CommStep,
  Communication,
  CopyStats,
  Device,
  KernelStats,
  LaunchStats,
  Pipeline,
  RankRow,
  RankSummary,
  Roofline,
  RooflineClass,
  RooflineOp,
  Spread,
  Step,
  StrategyRow,
  Summary,
  SyncStats,
} from './report_types';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

// ---- awaiting generation -------------------------------------------------------
// WorkerReport.flops, .findings, .waterfall and .distributed are dict[str, Any] in
// analysis/report.py, so the schema says nothing of their keys and the panels read them
// as JSON (with `as Json` casts). Once they are Structs, rerun scripts/gen_ts_types.py
// and delete these overrides and the casts.

/** A WorkerReport with its untyped blocks as JSON. */
export interface WorkerReport extends Omit<generated.WorkerReport, 'flops' | 'findings' | 'waterfall' | 'distributed'> {
  flops: JsonObject | null;
  findings: JsonObject[];
  waterfall: JsonObject[];
  distributed: JsonObject | null;
}

/** RunReport.ranks is Any in analysis/report.py (analysis cannot import diagnosis): it
 * holds a diagnosis.ranks.RankSummary, whose type is generated too. */
export interface RunReport extends Omit<generated.RunReport, 'workers' | 'ranks'> {
  workers: WorkerReport[];
  ranks: generated.RankSummary | null;
}

// ---- the plugin's bodies (tensorboard/plugin.py, tensorboard/runs.py: plain dicts) ----
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
  strategies: generated.StrategyRow[]; // the loaded runs side by side by strategy (diagnosis/strategies.py)
}
