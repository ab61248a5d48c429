// The plugin's routes, by relative URL: the iframe's <base> is data/plugin/mfu/.
import type { CompareBody, PartialReport, PendingFile, RunReport, RunsBody } from './types';

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
  return (await getJson<RunsBody>(`./runs${refresh ? '?refresh=1' : ''}`)).body;
}

/** The run's report; while its files are analysed (HTTP 202), the reports in so far and the
 * files still pending (the tab polls until none are). */
export async function fetchReport(run: string): Promise<{ report: RunReport; pending: PendingFile[] }> {
  const { status, body } = await getJson<RunReport | PartialReport>(`./report?run=${encodeURIComponent(run)}`);
  if (status === 202) return { report: body, pending: (body as PartialReport).pending ?? [] };
  return { report: body, pending: [] };
}

export async function fetchCompare(runs: string[]): Promise<CompareBody> {
  const q = runs.map((r) => `run=${encodeURIComponent(r)}`).join('&');
  return (await getJson<CompareBody>(`./compare?${q}`)).body;
}

/** The TensorBoard page around the iframe (data/plugin/mfu/ -> ../../../), keeping any path prefix. */
export function tensorboardUrl(hash: string): string {
  const root = new URL('../../../', document.baseURI);
  root.hash = hash;
  return root.toString();
}
