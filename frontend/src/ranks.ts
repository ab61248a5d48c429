// The ranks of a distributed run side by side (RunReport.ranks, diagnosis.ranks).
import { banner, card } from './card';
import { bubbleColumn, strategyText } from './communication';
import { h } from './dom';
import * as f from './format';
import { pendingLabel } from './status';
import { type Column, numColumn, table } from './table';
import type { JobMfu, PendingFile, RankRow, RankSummary } from './types';

// Each rank's overlap, waiting, bubble and clock (diagnosis/distributed.py; docs/distributed.md).
const distributedColumns: Column<RankRow>[] = [
  numColumn('overlap', 'Overlap', (x) => x.overlap_ratio, f.pct, 'Share of its communication running beside compute'),
  numColumn(
    'wait',
    'Waits / step',
    (x) => x.collective_wait_us_per_step,
    f.dur,
    'Time inside collectives waiting for a rank that started later, clocks aligned',
  ),
  bubbleColumn(),
  numColumn(
    'clock',
    'Clock shift',
    (x) => x.clock_shift_us,
    f.dur,
    "Added to this rank's timestamps to read the reference rank's clock (matched collective ends)",
  ),
];

const RANK_COLUMNS: Column<RankRow>[] = [
  numColumn('rank', 'Rank', (x) => x.rank, f.counter(0)),
  { key: 'worker', label: 'Worker', value: (x) => x.worker, cell: (x) => h('span', { class: 'mono' }, x.worker) },
  numColumn('step', f.label('step_time_us'), (x) => x.step_time_us, f.dur, f.definition('step_time_us')),
  numColumn('busy', f.label('gpu_busy_share'), (x) => x.gpu_busy_share, f.pct, f.definition('gpu_busy_share')),
  numColumn('idle', f.label('idle_share'), (x) => x.idle_share, f.pct, f.definition('idle_share')),
  numColumn(
    'comm',
    'Exposed comm / step',
    (x) => x.exposed_communication_us_per_step,
    f.dur,
    'Collective kernels running with no compute alongside, which includes waiting for the slowest rank',
  ),
  ...distributedColumns,
  numColumn('mfu', f.label('mfu'), (x) => x.mfu, f.pct, f.definition('mfu')),
];

/** The job's one MFU, where it likely lies, and whose step it is over (RankSummary.job). */
function jobLine(j: JobMfu): HTMLElement {
  const range = j.mfu_range ? ` · likely ${f.pct(j.mfu_range.low)}–${f.pct(j.mfu_range.high)}` : '';
  return h(
    'p',
    {
      testid: 'ranks-job-mfu',
      title: `${f.definition('ranks.job.mfu')}. Likely: ${f.definition('ranks.job.mfu_range')}.`,
    },
    h('strong', null, `${f.label('ranks.job.mfu')} ${f.pct(j.mfu)}`),
    `${range} · over ${j.ranks} ranks and the ${f.label('ranks.job.step_time_unprofiled_us').toLowerCase()}, `,
    `${f.dur(j.step_time_unprofiled_us)}: ${j.worker}'s estimate, the shortest of the ranks'`,
  );
}

/** A distributed run's ranks side by side, with the straggler the others wait for, each rank's
 * overlap, waits and bubble, and how its clock was aligned with the others'; while files are
 * `pending`, the ranks in so far and a line naming the others (no straggler yet). */
export function ranksCard(r: RankSummary, strategy: string[], pending: PendingFile[] = []): HTMLElement {
  const straggler = r.straggler
    ? banner('warn', 'straggler', `Straggler: ${r.straggler.worker}`, h('div', null, r.straggler.reason))
    : null;
  const el = card(
    // Several ranks are never "single GPU": a strategy the collectives did not show is unknown.
    `Ranks side by side${r.world_size ? ` (world size ${r.world_size})` : ''} · ${strategy.length ? strategyText(strategy) : 'strategy not detected'}`,
    [
      r.job ? jobLine(r.job) : null,
      straggler,
      table<RankRow>(r.ranks, RANK_COLUMNS, { testid: 'ranks-table', sortKey: 'rank', sortDesc: false, at: 'ranks' }),
      pending.length
        ? h(
            'p',
            { class: 'dim small', testid: 'ranks-pending' },
            `Still analysing: ${pending.map((p) => `${p.worker} (${pendingLabel(p)})`).join(', ')}. `,
            'The straggler is named once every rank is in.',
          )
        : null,
      r.clock_note ? h('p', { class: 'dim small', testid: 'clock-note' }, r.clock_note) : null,
      r.mfu_note ? h('p', { class: 'dim small', testid: 'ranks-mfu-note' }, r.mfu_note) : null,
    ],
    {
      help: 'Every rank of this run. A collective runs until all ranks join it, so the ranks that wait show it as exposed communication; the rank with the least is the one they wait for.',
      cls: 'wide',
    },
  );
  el.dataset.scope = 'ranks'; // the run's (the Overview's worker root is inside, not around it)
  return el;
}
