// "Download report": the links in the tab, and the page the downloaded HTML file shows.
//
// The server writes that file (tensorboard/offline.py): the report as JSON in a data block
// and this very bundle as an inline module script. When the bundle loads and finds the data
// block, it draws the Overview from it: no routes, no network (the file's CSP allows none).
import { disposeCharts } from './charts';
import { type Child, clear, h, icon, replace } from './dom';
import { brand } from './header';
import { renderWorker } from './overview';
import { cssVariables } from './palette';
import { ranksCard } from './ranks';
import css from './style.css';
import type { RunReport } from './types';
import { usable, workerLabel } from './workers';

const DATA_ID = 'mfu-offline-report'; // tensorboard/offline.py's DATA_ID
const ICON_DOWNLOAD = 'M5 20h14v-2H5v2zm14-11h-4V3H9v6H5l7 7 7-7z';

interface OfflinePayload {
  report: { schema_version: number; tool_version: string; runs: RunReport[] };
  worker: number;
  saved_at: string;
}

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

/** The report inlined in an offline page, or null in the tab. */
export function offlinePayload(): OfflinePayload | null {
  const el = document.getElementById(DATA_ID);
  if (el?.tagName !== 'SCRIPT') return null;
  try {
    const p = JSON.parse(el.textContent ?? '') as OfflinePayload;
    return p?.report?.runs?.length ? p : null;
  } catch {
    return null;
  }
}

/** Draws the offline page: the run's Overview, with a picker for its worker reports. */
export function renderOffline(p: OfflinePayload): void {
  const style = document.createElement('style');
  style.textContent = cssVariables() + css;
  document.head.appendChild(style);
  const report = p.report.runs[0];
  const main = h('main', { testid: 'main' });
  const select = h('select', { testid: 'worker-select', title: 'Worker · device · span' });
  const good = usable(report);
  const show = (idx: number) => {
    const w = report.workers[idx];
    disposeCharts(main);
    replace(main, w ? workerView(report, idx) : h('p', { class: 'muted' }, 'This run has no report.'));
  };
  replace(
    select,
    report.workers.map((w, i) => h('option', { props: { value: String(i) } }, workerLabel(w, report))),
  );
  const first = p.worker >= 0 && p.worker < report.workers.length ? p.worker : (good[0] ?? 0);
  select.value = String(first);
  select.disabled = report.workers.length < 2;
  select.addEventListener('change', () => show(Number(select.value)));
  const saved = new Date(p.saved_at);
  const app = h(
    'div',
    { class: 'app offline' },
    h(
      'header',
      { class: 'topbar' },
      brand('saved report'),
      h('label', { class: 'picker' }, h('span', null, 'Worker'), select),
      h('div', { class: 'spacer' }),
      h(
        'span',
        { class: 'dim small', testid: 'saved-at' },
        `saved ${Number.isNaN(saved.getTime()) ? p.saved_at : saved.toLocaleString()} · tb_mfu_plugin ${p.report.tool_version}`,
      ),
    ),
    main,
  );
  clear(document.body);
  document.body.appendChild(app);
  show(first);
}

function workerView(report: RunReport, idx: number): Child {
  return [
    h('div', { class: 'runbar' }, h('h1', { class: 'runtitle', testid: 'run-title' }, report.name)),
    report.ranks ? ranksCard(report.ranks) : null,
    renderWorker(report.workers[idx]),
  ];
}
