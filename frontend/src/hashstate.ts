// The view's state in the URL hash, so that a link opens the same view for a teammate and
// back/forward step through views.
//
// The tab runs in TensorBoard's plugin iframe; the address bar is TensorBoard's page (our
// parent, same origin). TensorBoard 2.21 keeps its own state in that hash as
// `#<plugin>&key=value&...` (tf_storage: keys and values URI-encoded, the first part without
// '=' is the plugin id), so ours is a few more keys there: `#mfu&view=compare&run=a&compare=a,b`.
// Keys it does not know, TensorBoard keeps. Invalid values fall back to the defaults.
import type { RunReport, WorkerReport } from './types';

export type View = 'overview' | 'compare' | 'strategies';

export interface HashState {
  view?: View;
  run?: string;
  worker?: string; // the worker report: its worker name, span and device
  span?: string;
  device?: number;
  compare?: string[];
}

const TAB = 'mfu';
const KEYS = ['view', 'run', 'worker', 'span', 'device', 'compare'] as const;
const MAX_VALUE = 4096; // the server's MAX_NAME: longer is not a run of ours
const MAX_COMPARE = 8;

/** The window whose address bar holds the state: TensorBoard's page, else our own (offline). */
function host(): Window {
  try {
    const p = window.parent;
    if (p !== window && typeof p.location.hash === 'string') return p;
  } catch {
    /* another origin: not TensorBoard */
  }
  return window;
}

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** TensorBoard's reading of a hash: the plugin id, then the key=value pairs in order. */
function parse(hash: string): { tab: string; pairs: [string, string][] } {
  let tab = '';
  const pairs: [string, string][] = [];
  for (const part of hash.replace(/^#/, '').split('&')) {
    const kv = part.split('=');
    if (kv.length === 1) tab = kv[0];
    else if (kv.length === 2) {
      const k = decode(kv[0]);
      const v = decode(kv[1]);
      if (k !== null && v !== null) pairs.push([k, v]);
    }
  }
  return { tab, pairs };
}

function text(v: string | undefined): string | undefined {
  return v !== undefined && v.length > 0 && v.length <= MAX_VALUE && !v.includes('\u0000') ? v : undefined;
}

/** Compare's runs: each name URI-encoded, joined by commas (names may hold commas). */
function compareList(v: string | undefined): string[] | undefined {
  if (!v) return undefined;
  const names = v.split(',').map((n) => decode(n) ?? '');
  if (names.length > MAX_COMPARE || names.some((n) => !text(n))) return undefined;
  return Array.from(new Set(names));
}

export function readHash(): HashState {
  const { tab, pairs } = parse(host().location.hash);
  if (tab && tab !== TAB) return {};
  const get = (k: string) => pairs.find(([key]) => key === k)?.[1];
  const view = get('view');
  const device = get('device');
  return {
    view: view === 'overview' || view === 'compare' || view === 'strategies' ? view : undefined,
    run: text(get('run')),
    worker: text(get('worker')),
    span: get('span') !== undefined && (get('span') ?? '').length <= MAX_VALUE ? get('span') : undefined,
    device: device && /^\d{1,4}$/.test(device) ? Number(device) : undefined,
    compare: compareList(get('compare')),
  };
}

/** Writes the state into the hash, keeping TensorBoard's own keys. ``push`` makes a history
 * entry (a user's choice: back returns to it); otherwise the entry is replaced. */
export function writeHash(s: HashState, push: boolean): void {
  const w = host();
  const { tab, pairs } = parse(w.location.hash);
  if (tab && tab !== TAB) return; // TensorBoard shows another plugin: not ours to change
  const values: Record<string, string | undefined> = {
    view: s.view,
    run: s.run,
    worker: s.worker,
    span: s.worker !== undefined ? s.span : undefined,
    device: s.worker !== undefined && s.device !== undefined ? String(s.device) : undefined,
    compare: s.compare?.length ? s.compare.map(encodeURIComponent).join(',') : undefined,
  };
  const kept = pairs.filter(([k]) => !(KEYS as readonly string[]).includes(k));
  const ours = KEYS.filter((k) => values[k] !== undefined).map((k) => [k, values[k] as string] as [string, string]);
  const hash = [TAB, ...[...kept, ...ours].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)].join(
    '&',
  );
  if (`#${hash}` === w.location.hash) return;
  const url = new URL(w.location.href);
  url.hash = hash;
  if (push) w.history.pushState(w.history.state, '', url.toString());
  else w.history.replaceState(w.history.state, '', url.toString());
}

/** Calls ``fn`` with the hash's state when back/forward (or an edited address) changes it.
 * Our own writes fire no event; TensorBoard's may, so ``fn`` must ignore a state it has. */
export function onHashChange(fn: (s: HashState) => void): void {
  const w = host();
  const stop = new AbortController();
  const changed = () => fn(readHash());
  w.addEventListener('popstate', changed, { signal: stop.signal });
  w.addEventListener('hashchange', changed, { signal: stop.signal });
  // The listeners sit on TensorBoard's window, which outlives this iframe.
  if (w !== window) window.addEventListener('pagehide', () => stop.abort(), { once: true });
}

/** The worker report the hash names (worker, then span and device when given), if the report has it. */
export function hashWorker(report: RunReport, s: HashState): number | undefined {
  if (s.worker === undefined) return undefined;
  const i = report.workers.findIndex(
    (w) =>
      w.name === s.worker &&
      (s.span === undefined || w.span === s.span) &&
      (s.device === undefined || w.device?.index === s.device),
  );
  return i >= 0 ? i : undefined;
}

/** What names a worker report in the hash. */
export function workerKey(w: WorkerReport | undefined): Pick<HashState, 'worker' | 'span' | 'device'> {
  if (!w) return {};
  return { worker: w.name, span: w.span, device: w.device?.index ?? undefined };
}
