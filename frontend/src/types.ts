// The tab's types. The report's come from report_types.ts, which scripts/gen_ts_types.py
// generates from the msgspec schema of tb_mfu_plugin/analysis/report.py; this file adds
// the plugin's own /runs and /compare bodies.
// Units: time in µs, shares as fractions 0-1, bytes, FLOPs and FLOP/s as numbers.
import type { FindingsAgainstBaseline, RunReport, StrategyRow } from './report_types';

export type {
  Collective,
  CommStep,
  Communication,
  CopyStats,
  Device,
  Distributed,
  Finding,
  FlopsDetail,
  KernelStats,
  LaunchStats,
  Pipeline,
  RankRow,
  RankSummary,
  Roofline,
  RooflineClass,
  RooflineOp,
  RunReport,
  Spread,
  Step,
  StrategyRow,
  Summary,
  SyncStats,
  WaterfallBar,
  WorkerReport,
} from './report_types';

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
  uploads?: UploadsStatus;
}

/** Upload in the tab (tensorboard/share.py: uploads_status). */
export interface UploadsStatus {
  enabled: boolean;
  reason: string | null;
  max_bytes: number;
}

/** A file of a run still being analysed, in /report's 202 body. */
export interface PendingFile {
  worker: string;
  span: string;
  file: string;
  state: LoadState;
  progress: number;
  bytes_read: number;
  bytes_total: number;
}

/** /report while a run's files are analysed (HTTP 202): the reports in so far in the run's
 * order, the ranks in so far side by side (no straggler until every rank is in), the files
 * still pending and the run's progress. A complete report (200) has no `pending`. */
export interface PartialReport extends RunReport {
  state: LoadState;
  progress: number;
  size: number;
  pending: PendingFile[];
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
  strategies: StrategyRow[]; // the loaded runs side by side by strategy (diagnosis/strategies.py)
  // each run's findings against the baseline's, per pair of workers (diagnosis/compare.py)
  findings: FindingsAgainstBaseline[];
}
