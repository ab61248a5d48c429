// "Download report": the links in the tab, and the bodies of the page the downloaded HTML
// file shows.
//
// The server writes that file (tensorboard/offline.py; `tb-mfu analyze --html` too): the
// bodies the routes would send (/runs and each run's /report) as JSON in a data block, and
// this very bundle as an inline module script. When the bundle loads and finds the data
// block, index.ts runs the tab with its route calls answered from those bodies (api.ts): the
// same code draws the page, with no network (the file's CSP allows none).
import { h, icon } from './dom';
import type { OfflinePayload } from './types';

const DATA_ID = 'mfu-offline-report'; // tensorboard/offline.py's DATA_ID
const ICON_DOWNLOAD = 'M5 20h14v-2H5v2zm14-11h-4V3H9v6H5l7 7 7-7z';

/** The links that download the run's report: the offline page (opening on worker report
 * ``worker``) and the JSON. */
export function downloadLinks(run: string, worker: number): HTMLElement {
  const link = (format: 'html' | 'json', title: string) =>
    h(
      'a',
      {
        props: { href: `./download?run=${encodeURIComponent(run)}&format=${format}&worker=${worker}` },
        attrs: { download: '' },
        testid: `download-${format}`,
        title,
      },
      format.toUpperCase(),
    );
  return h(
    'span',
    { class: 'downloads', testid: 'download' },
    icon(ICON_DOWNLOAD, 14),
    h('span', { class: 'dim' }, 'Download report'),
    link('html', 'One HTML file with this Overview, for anyone, offline'),
    link('json', 'The report as tb-mfu analyze --json prints it'),
  );
}

/** The bodies inlined in an offline page, or null in the tab. */
export function offlinePayload(): OfflinePayload | null {
  const el = document.getElementById(DATA_ID);
  if (el?.tagName !== 'SCRIPT') return null;
  try {
    const p = JSON.parse(el.textContent ?? '') as OfflinePayload;
    return p?.report?.runs?.length && p.runs?.runs ? p : null;
  } catch {
    return null;
  }
}

/** When the page was saved, and by which version, for its top bar. */
export function savedAt(p: OfflinePayload): HTMLElement {
  const at = new Date(p.saved_at);
  return h(
    'span',
    { class: 'dim small', testid: 'saved-at' },
    `saved ${Number.isNaN(at.getTime()) ? p.saved_at : at.toLocaleString()} · tb_mfu_plugin ${p.report.tool_version}`,
  );
}
