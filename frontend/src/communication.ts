// A rank's collective communication (WorkerReport.communication, .pipeline): overlap with
// compute per step, the collectives with their bus bandwidth, the pipeline bubble.
// docs/distributed.md defines every figure.
import { card, cardNotes } from './card';
import { h } from './dom';
import * as f from './format';
import { type Column, numColumn, table } from './table';
import type { Collective, Communication, Pipeline, WorkerReport } from './types';

/** "FSDP × TP", or "single GPU". */
export function strategyText(names: string[] | undefined): string {
  return names?.length ? names.join(' × ') : 'single GPU';
}

function kpi(label: string, value: string, title: string): HTMLElement {
  return h(
    'div',
    { class: 'kpi', title },
    h('div', { class: 'kpi-label' }, label),
    h('div', { class: 'kpi-value kpi-value-small' }, value),
  );
}

function overlapKpis(c: Communication): HTMLElement {
  return h(
    'div',
    { class: 'kpis comm', testid: 'comm-kpis' },
    kpi('Strategy', strategyText(c.strategy), c.strategy_evidence.join('\n')),
    kpi('Communication / step', f.dur(c.communication_us_per_step), 'Union of the collective kernels in the steps'),
    kpi('Exposed / step', f.dur(c.exposed_us_per_step), 'Communication with no compute kernel running'),
    kpi(
      'Overlap',
      f.pct(c.overlap_ratio),
      "Share of communication time with a compute kernel running (Holistic Trace Analysis's comm/comp overlap)",
    ),
    kpi('Link', c.link ? `${c.link} · ${f.gbps(c.link_gbps)}` : f.NA, c.link_source ?? ''),
  );
}

const COLLECTIVE_COLUMNS: Column<Collective>[] = [
  { key: 'kind', label: 'Collective', value: (x) => x.kind, cell: (x) => h('span', { class: 'mono' }, x.kind) },
  {
    key: 'group',
    label: 'Group',
    value: (x) => x.group ?? '',
    cell: (x) => `${x.group ?? f.NA}${x.group_size ? ` (${x.group_size})` : ''}`,
    title: 'Process group (its ranks)',
  },
  { key: 'role', label: 'Role', value: (x) => x.role ?? '', title: 'The parallelism this group serves' },
  { key: 'dtype', label: 'dtype', value: (x) => x.dtype ?? '' },
  numColumn('calls', 'Calls / step', (x) => x.count_per_step, f.counter(1)),
  numColumn('bytes', 'Bytes / step', (x) => x.bytes_per_step, f.bytes),
  numColumn('time', 'Kernel time / step', (x) => x.us_per_step, f.dur),
  numColumn(
    'exposed',
    'Exposed / step',
    (x) => x.exposed_us_per_step,
    f.dur,
    'Its kernel time with no compute kernel running',
  ),
  {
    key: 'busbw',
    label: 'Bus bandwidth',
    num: true,
    value: (x) => x.busbw_gbps,
    cell: (x) => `${f.gbps(x.busbw_gbps)}${x.bandwidth_basis === 'last arrival' ? '' : ' ¹'}`,
    title:
      'nccl-tests busbw: bytes / transfer time × 2(n−1)/n (all-reduce), (n−1)/n (all-gather, reduce-scatter, all-to-all), 1 (send/recv, broadcast)',
  },
  numColumn('share', 'Of link peak', (x) => x.link_peak_share, f.pct),
];

function collectivesTable(rows: Collective[]): HTMLElement {
  return table<Collective>(rows, COLLECTIVE_COLUMNS, { testid: 'collectives-table', sortKey: 'time' });
}

/** A rank's (or a run's mean) pipeline bubble: n/a where it has no pipeline stages. */
export function bubbleColumn<T extends { bubble_share: number | null }>(): Column<T> {
  return numColumn(
    'bubble',
    'Bubble',
    (x) => x.bubble_share,
    f.pct,
    'Pipeline stages: send/recv with nothing to compute, share of the step (n/a: no pipeline stages)',
  );
}

function pipelineLine(p: Pipeline): HTMLElement {
  const analytic =
    p.analytic_bubble_share !== null ? `, analytic (p−1)/(v·m+p−1) ${f.pct(p.analytic_bubble_share)}` : '';
  return h(
    'p',
    { testid: 'pipeline-bubble' },
    h('strong', null, 'Pipeline: '),
    `stage ${p.stage ?? f.NA} of ${p.pipeline_size ?? f.NA}, ${p.microbatches ?? f.NA} micro-batches (schedule ${p.schedule ?? f.NA}); `,
    `bubble ${f.dur(p.bubble_us_per_step)} per step, ${f.pct(p.bubble_share)} of the step${analytic}`,
  );
}

/** The card, or null on a rank without collectives. */
export function communicationCard(w: WorkerReport): HTMLElement | null {
  const c = w.communication;
  if (!c) return null;
  const kernelTime = c.collectives.some((x) => x.bandwidth_basis !== 'last arrival' && x.busbw_gbps !== null);
  return card(
    'Communication',
    [
      overlapKpis(c),
      w.pipeline ? pipelineLine(w.pipeline) : null,
      collectivesTable(c.collectives),
      c.unlisted
        ? h(
            'p',
            { class: 'note', testid: 'collectives-rest' },
            `Rest: ${f.dur(c.unlisted.us_per_step)} per step, ${f.dur(c.unlisted.exposed_us_per_step)} exposed, so the rows add up to the total: ${c.unlisted.reason}.`,
          )
        : null,
      cardNotes(
        kernelTime
          ? [
              "¹ From this rank's kernel time, which includes waiting for the other members: a lower bound. With every rank's trace in the run, the bandwidth is measured from the last member's arrival.",
            ]
          : [],
      ),
    ],
    {
      testid: 'communication-card',
      cls: 'wide',
      help: 'Collective kernels of this rank per mean step: how much runs beside compute (overlap) and how much the step waits on (exposed), and what each collective moves against the link it runs over.',
    },
  );
}
