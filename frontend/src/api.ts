// The plugin's routes, by relative URL: the iframe's <base> is data/plugin/mfu/. In a saved
// offline page (offline.ts) the same calls are answered from the bodies the page holds, so the
// page is drawn by the code that draws the live tab.
import type { CompareBody, OfflinePayload, PartialReport, PendingFile, RunReport, RunsBody } from './types';

let saved: OfflinePayload | null = null;

/** Answer the route calls from an offline page's bodies from now on. */
export function answerFrom(payload: OfflinePayload): void {
  saved = payload;
}

/** Whether this is a saved offline page (no server behind it). */
export function isOffline(): boolean {
  return saved !== null;
}

export class HttpError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

async function getJson<T>(url: string): Promise<{ status: number; body: T }> {
  const res = await fetch(url, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
  if (!res.ok) {
    let text = '';
    try {
      text = (await res.text()).trim();
    } catch {
      /* ignore */
    }
    throw new HttpError(res.status, `${res.status} ${res.statusText}${text ? `: ${text.slice(0, 300)}` : ''}`);
  }
  return { status: res.status, body: (await res.json()) as T };
}

export async function fetchRuns(refresh = false): Promise<RunsBody> {
  if (saved) return saved.runs;
  return (await getJson<RunsBody>(`./runs${refresh ? '?refresh=1' : ''}`)).body;
}

/** The run's report; while its files are analysed (HTTP 202), the reports in so far and the
 * files still pending (the tab polls until none are). */
export async function fetchReport(run: string): Promise<{ report: RunReport; pending: PendingFile[] }> {
  if (saved) {
    const report = saved.report.runs.find((r) => r.name === run);
    if (!report) throw new HttpError(404, `404 Not Found: no run named ${JSON.stringify(run)} in this saved report`);
    return { report, pending: [] };
  }
  const { status, body } = await getJson<RunReport | PartialReport>(`./report?run=${encodeURIComponent(run)}`);
  if (status === 202) return { report: body, pending: (body as PartialReport).pending ?? [] };
  return { report: body, pending: [] };
}

export async function fetchCompare(runs: string[]): Promise<CompareBody> {
  if (saved) throw new HttpError(404, '404 Not Found: a saved report has no Compare');
  const q = runs.map((r) => `run=${encodeURIComponent(r)}`).join('&');
  return (await getJson<CompareBody>(`./compare?${q}`)).body;
}

/** The TensorBoard page around the iframe (data/plugin/mfu/ -> ../../../), keeping any path prefix. */
export function tensorboardUrl(hash: string): string {
  const root = new URL('../../../', document.baseURI);
  root.hash = hash;
  return root.toString();
}
