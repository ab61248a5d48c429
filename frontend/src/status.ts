// How the tab shows where the runs are: their load-state labels, the header's status line,
// the loading strip, and the panels shown instead of a report (progress, empty, error).
import { banner, card } from './card';
import { type Child, h, ICONS, icon } from './dom';
import * as f from './format';
import type { PendingFile, RunStatus, RunsBody } from './types';

export function loadingNow(r: RunStatus): boolean {
  return r.state === 'queued' || r.state === 'loading';
}

export function stateLabel(r: RunStatus): string {
  switch (r.state) {
    case 'queued':
      return 'queued';
    case 'loading':
      return `loading ${f.pct(r.progress, 0)}`;
    case 'error':
      return 'error';
    case 'partial':
      return 'some files failed';
    default:
      return '';
  }
}

/** The header's one-line status: unreachable, scanning, analysing n runs, or how many there are. */
export function statusLine(body: RunsBody | null, error: string | null): HTMLElement {
  const runs = body?.runs ?? [];
  const loading = runs.filter(loadingNow);
  const failed = runs.filter((r) => r.state === 'error' || r.state === 'partial');
  if (error) return h('span', { class: 'st st-err' }, icon(ICONS.error, 12), ' server unreachable');
  if (!body?.scanned) return h('span', { class: 'st' }, h('span', { class: 'spinner' }), ' scanning logdir…');
  if (loading.length) {
    const p = loading.reduce((a, r) => a + r.progress, 0) / loading.length;
    return h(
      'span',
      { class: 'st' },
      h('span', { class: 'spinner' }),
      ` analysing ${f.counted(loading.length, 'run')} · ${f.pct(p, 0)}`,
    );
  }
  return h(
    'span',
    { class: 'st st-ok' },
    f.counted(runs.length, 'run'),
    failed.length ? ` · ${failed.length} with errors` : '',
  );
}

/** The loading strip: progress of the runs still analysing, and the scan's errors. */
export function loadingRows(body: RunsBody | null): Child[] {
  const loading = (body?.runs ?? []).filter(loadingNow);
  const items: Child[] = [];
  const MAX_ROWS = 4;
  const shown = loading.length > MAX_ROWS ? loading.slice(0, MAX_ROWS - 1) : loading;
  for (const r of shown) {
    items.push(
      h(
        'div',
        { class: 'lrow' },
        h('span', { class: 'lname may-overflow', title: r.name }, r.name),
        h(
          'span',
          { class: 'progress' },
          h('span', { class: 'bar', style: { width: `${(r.progress * 100).toFixed(1)}%` } }),
        ),
        h('span', { class: 'lval' }, `${f.pct(r.progress, 0)} of ${f.bytes(r.size)}`),
      ),
    );
  }
  if (shown.length < loading.length) {
    const rest = loading.slice(shown.length);
    const bytesLeft = rest.reduce((a, r) => a + r.size * (1 - r.progress), 0);
    items.push(
      h('div', { class: 'lrow dim' }, `… and ${rest.length} more runs waiting (${f.bytes(bytesLeft)} of traces)`),
    );
  }
  for (const e of body?.errors ?? [])
    items.push(h('div', { class: 'lrow err' }, icon(ICONS.warn, 12), h('span', { class: 'mono' }, e)));
  return items;
}

export function progressPanel(r: RunStatus): HTMLElement {
  return card(
    `Analysing ${r.name}`,
    [
      h(
        'div',
        { class: 'progress big' },
        h('span', { class: 'bar', style: { width: `${(r.progress * 100).toFixed(1)}%` } }),
      ),
      h(
        'p',
        { class: 'dim' },
        `${f.pct(r.progress, 0)} of ${f.bytes(r.size)} of traces. Other runs stay usable meanwhile.`,
      ),
      h(
        'table',
        { class: 'grid files' },
        h(
          'tbody',
          null,
          r.workers.flatMap((w) =>
            w.spans.map((s) =>
              h(
                'tr',
                null,
                h('td', { class: 'mono' }, s.file),
                h('td', { class: 'num' }, f.bytes(s.size)),
                h(
                  'td',
                  null,
                  h(
                    'span',
                    { class: 'progress' },
                    h('span', { class: 'bar', style: { width: `${(s.progress * 100).toFixed(1)}%` } }),
                  ),
                ),
                h(
                  'td',
                  { class: 'num' },
                  s.state === 'done'
                    ? s.cached
                      ? 'cached'
                      : 'done'
                    : s.state === 'loading'
                      ? f.pct(s.progress, 0)
                      : s.state,
                ),
              ),
            ),
          ),
        ),
      ),
    ],
    { cls: 'progress-card', testid: 'run-progress', extra: h('span', { class: 'spinner' }) },
  );
}

/** A run whose first files are in: how many, the progress, and what still comes. */
export function partialBanner(r: RunStatus, pending: PendingFile[]): HTMLElement {
  const files = r.workers.reduce((n, w) => n + w.spans.length, 0);
  return banner(
    'info',
    'partial-banner',
    `${files - pending.length} of ${f.counted(files, 'file')} analysed · ${f.pct(r.progress, 0)}`,
    h(
      'div',
      null,
      'The ranks fill in as their files are analysed; the straggler and Compare come when all are in. Still analysing: ',
      pending.map((p, i) => [i ? ', ' : '', h('span', { class: 'mono' }, p.worker), ` (${pendingLabel(p)})`]),
    ),
    h('span', { class: 'spinner' }),
  );
}

export function pendingLabel(p: PendingFile): string {
  return p.state === 'loading' ? f.pct(p.progress, 0) : p.state;
}

export function emptyPanel(sources: RunsBody['sources']): HTMLElement {
  return card(
    'No profiler traces found',
    [
      h('p', null, 'The MFU tab reads torch.profiler traces (*.pt.trace.json or *.pt.trace.json.gz) under:'),
      h(
        'ul',
        null,
        sources.length
          ? sources.map((s) => h('li', { class: 'mono' }, s.name ? `${s.name}: ${s.path}` : s.path))
          : h('li', null, 'no --logdir given'),
      ),
      h('p', null, "Record one with the profiler's TensorBoard handler, then reload:"),
      h(
        'pre',
        null,
        [
          'with torch.profiler.profile(',
          '        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],',
          '        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),',
          '        on_trace_ready=torch.profiler.tensorboard_trace_handler("./logs/run_a"),',
          '        record_shapes=True) as prof:',
          '    for batch in loader:',
          '        train_step(batch); prof.step()',
        ].join('\n'),
      ),
    ],
    { cls: 'empty-card', testid: 'empty' },
  );
}

export function errorPanel(title: string, lines: string[]): HTMLElement {
  const body = lines.map((l) => h('div', { class: 'mono' }, l));
  return banner('error', 'run-error', title, body);
}
