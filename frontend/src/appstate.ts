// What the tab shows and why: the view, run, workers and runs compared; the choices kept in
// localStorage and in the URL hash (hashstate.ts), and which run and worker report to show
// when the user has not picked one. The main area and the header read this one state.
import { fetchReport } from './api';
import { type HashState, hashWorker, type View, workerKey, writeHash } from './hashstate';
import type { PendingFile, RunReport, RunStatus, RunsBody, Suggestion, WorkerReport } from './types';
import { usable } from './workers';

export type { View };

const STORE = 'tb-mfu:';

interface State {
  runs: RunsBody | null;
  runsError: string | null;
  view: View;
  run: string | null;
  worker: Map<string, number>; // selected worker report per run
  // The report shown per run, by identity: a rank that arrives later moves the indices.
  shownWorker: Map<string, string>;
  compare: string[];
  // Per run, the last report and the files it still waited for (a 202's pending list).
  reports: Map<string, { sig: string; report: RunReport; pending: PendingFile[] }>;
  shownSig: string; // what the main area shows, to re-render only on change
}

export const state: State = {
  runs: null,
  runsError: null,
  view: 'overview',
  run: null,
  worker: new Map(),
  shownWorker: new Map(),
  compare: [],
  reports: new Map(),
  shownSig: '',
};

// ---- kept in localStorage ------------------------------------------------------

export function store(key: string, value: string | null): void {
  try {
    if (value === null) localStorage.removeItem(STORE + key);
    else localStorage.setItem(STORE + key, value);
  } catch {
    /* storage may be disabled */
  }
}

export function stored(key: string): string | null {
  try {
    return localStorage.getItem(STORE + key);
  } catch {
    return null;
  }
}

/** The view used last here, if one was kept. */
export function restoreView(): void {
  const saved = stored('view');
  if (saved === 'compare' || saved === 'overview' || saved === 'strategies') state.view = saved;
}

// ---- the runs ------------------------------------------------------------------

export function runStatus(name: string | null): RunStatus | undefined {
  return state.runs?.runs.find((r) => r.name === name);
}

/** A run's load state and files as one string: it changes whenever its report may have. */
export function sig(r: RunStatus | undefined): string {
  if (!r) return 'none';
  return `${r.state}|${r.size}|${r.workers.map((w) => w.spans.map((s) => `${s.span}:${s.mtime}:${s.state}`).join(',')).join(';')}`;
}

/** The run's report, fetched again whenever a file's state changed (the signature): while
 * files are pending, each poll that sees one more done brings its report in. */
export async function reportFor(run: RunStatus): Promise<{ report: RunReport; pending: PendingFile[] }> {
  const s = sig(run);
  const hit = state.reports.get(run.name);
  if (hit && hit.sig === s) return hit;
  const got = await fetchReport(run.name);
  state.reports.set(run.name, { sig: s, ...got });
  return got;
}

// ---- the URL hash --------------------------------------------------------------

// What the URL hash asked for and the runs or the report do not show yet (hashstate.ts);
// ``under``: the run, or else the first run below it (an uploaded archive holds several).
let pending: HashState & { under?: boolean } = {};

/** Show ``run`` (or the first run below it) once a scan lists it: an upload's new run. */
export function awaitRun(run: string): void {
  pending = { run, under: true };
}

export function hashSnapshot(): HashState {
  const report = state.run ? state.reports.get(state.run)?.report : undefined;
  const idx = state.run ? state.worker.get(state.run) : undefined;
  return {
    view: state.view,
    run: state.run ?? undefined,
    ...(state.view === 'overview' && report && idx !== undefined ? workerKey(report.workers[idx]) : {}),
    compare: state.view !== 'overview' && state.compare.length ? state.compare : undefined,
  };
}

/** The view into the hash; not while a link's own state still waits to be shown. */
export function saveHash(push: boolean): void {
  if (pending.run === undefined && pending.compare === undefined && pending.worker === undefined)
    writeHash(hashSnapshot(), push);
}

/** A link's state, or back/forward's: shown now where it can be, the rest when runs and reports come. */
export function applyHash(hs: HashState): void {
  if (hs.view) state.view = hs.view;
  pending = { run: hs.run, worker: hs.worker, span: hs.span, device: hs.device, compare: hs.compare };
  resolvePending();
}

function resolvePending(): void {
  if (!state.runs) return;
  const names = state.runs.runs.map((r) => r.name);
  const settled = state.runs.scanned && !state.runs.scanning; // a name not listed now never will be
  const want = pending.run;
  if (want !== undefined) {
    const hit = names.includes(want) ? want : pending.under ? names.find((n) => n.startsWith(`${want}/`)) : undefined;
    if (hit !== undefined) {
      state.run = hit;
      pending.run = undefined;
    } else if (settled) pending = { ...pending, run: undefined, worker: undefined };
  }
  if (pending.compare && (settled || pending.compare.every((n) => names.includes(n)))) {
    state.compare = pending.compare.filter((n) => names.includes(n));
    pending.compare = undefined;
    compareFromLink = true;
  }
}

/** The worker report the hash names, once the run's report is there (its index, or undefined). */
export function takeHashWorker(report: RunReport): number | undefined {
  if (pending.worker === undefined || pending.run !== undefined) return undefined;
  const idx = hashWorker(report, pending);
  pending = { ...pending, worker: undefined, span: undefined, device: undefined };
  return idx;
}

// ---- what to show when the user has not picked ------------------------------------

export function pickDefaults(): void {
  resolvePending();
  const runs = state.runs?.runs ?? [];
  const names = runs.map((r) => r.name);
  if (!state.run || !names.includes(state.run)) {
    const saved = stored('run');
    const firstGood = runs.find((r) => r.state === 'ready' || r.state === 'partial');
    state.run = saved && names.includes(saved) ? saved : (firstGood?.name ?? names[0] ?? null);
  }
  state.compare = state.compare.filter((n) => names.includes(n));
  useSuggestion();
}

// The compare set came from a link: kept as the link gave it, like a pick.
let compareFromLink = false;

/** Whether the runs compared are the user's (picked, or from a link), not the suggestion. */
export function comparePicked(): boolean {
  return compareFromLink || stored('compare-touched') !== null;
}

/** What Compare or Strategies start with until the user picks: the server's suggestion
 * (/runs, diagnosis/pairing.py), runs of one model or of one GPU count. */
export function suggestion(view: View): Suggestion | undefined {
  const body = state.runs;
  if (!body || view === 'overview') return undefined;
  return view === 'strategies' ? body.suggested_strategies : body.suggested_compare;
}

/** Until the user picks, the runs the view shown starts with (none: the view says what to pick). */
export function useSuggestion(): void {
  const s = suggestion(state.view);
  if (!s || comparePicked()) return;
  const names = (state.runs?.runs ?? []).map((r) => r.name);
  state.compare = s.runs.filter((n) => names.includes(n));
}

/** A report's identity (worker, span, device) as one string. */
function identity(w: WorkerReport): string {
  return JSON.stringify(workerKey(w));
}

/** Which report to show: the one shown before (found again by identity), else the user's pick, else the first usable. */
export function pickWorker(run: string, report: RunReport): number {
  const before = state.shownWorker.get(run);
  const again = before === undefined ? -1 : report.workers.findIndex((w) => identity(w) === before);
  let idx = again >= 0 ? again : state.worker.get(run);
  if (idx === undefined || idx >= report.workers.length) idx = usable(report)[0] ?? 0;
  state.worker.set(run, idx);
  const w = report.workers[idx];
  if (w) state.shownWorker.set(run, identity(w));
  return idx;
}

/** The worker report a Compare column shows: the user's pick where usable, else the first usable. */
export function compareWorker(run: string, report: RunReport | null): number {
  const good = report ? usable(report) : [];
  const wi = state.worker.get(run);
  return wi === undefined || !good.includes(wi) ? (good[0] ?? 0) : wi;
}
