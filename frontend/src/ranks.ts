// The ranks of a distributed run side by side (RunReport.ranks, diagnosis.ranks).
import { card } from './card';
import { strategyText } from './communication';
import { h, ICONS, icon } from './dom';
import * as f from './format';
import { pendingLabel } from './status';
import { type Column, table } from './table';
import type { PendingFile, RankRow, RankSummary } from './types';

// Each rank's overlap, waiting, bubble and clock (diagnosis/distributed.py; docs/distributed.md).
const distributedColumns: Column<RankRow>[] = [
  {
    key: 'overlap',
    label: 'Overlap',
    num: true,
    value: (x) => x.overlap_ratio,
    cell: (x) => f.pct(x.overlap_ratio),
    title: 'Share of its communication running beside compute',
  },
  {
    key: 'wait',
    label: 'Waits / step',
    num: true,
    value: (x) => x.collective_wait_us_per_step,
    cell: (x) => f.dur(x.collective_wait_us_per_step),
    title: 'Time inside collectives waiting for a rank that started later, clocks aligned',
  },
  {
    key: 'bubble',
    label: 'Bubble',
    num: true,
    value: (x) => x.bubble_share,
    cell: (x) => (x.bubble_share === null ? '—' : f.pct(x.bubble_share)),
    title: 'Pipeline stages: send/recv with nothing to compute, share of the step',
  },
  {
    key: 'clock',
    label: 'Clock shift',
    num: true,
    value: (x) => x.clock_shift_us,
    cell: (x) => f.dur(x.clock_shift_us),
    title: "Added to this rank's timestamps to read the reference rank's clock (matched collective ends)",
  },
];

/** A distributed run's ranks side by side, with the straggler the others wait for, each rank's
 * overlap, waits and bubble, and how its clock was aligned with the others'; while files are
 * `pending`, the ranks in so far and a line naming the others (no straggler yet). */
export function ranksCard(r: RankSummary, strategy: string[] = [], pending: PendingFile[] = []): HTMLElement {
  const straggler = r.straggler
    ? h(
        'div',
        { class: 'banner warn', testid: 'straggler' },
        icon(ICONS.warn, 16),
        h('div', null, h('strong', null, `Straggler: ${r.straggler.worker}`), h('div', null, r.straggler.reason)),
      )
    : null;
  return card(
    `Ranks side by side${r.world_size ? ` (world size ${r.world_size})` : ''} · ${strategyText(strategy)}`,
    [
      straggler,
      table<RankRow>(
        r.ranks,
        [
          { key: 'rank', label: 'Rank', num: true, value: (x) => x.rank, cell: (x) => f.count(x.rank, 0) },
          {
            key: 'worker',
            label: 'Worker',
            value: (x) => x.worker,
            cell: (x) => h('span', { class: 'mono' }, x.worker),
          },
          {
            key: 'step',
            label: 'Median step',
            num: true,
            value: (x) => x.step_time_us,
            cell: (x) => f.dur(x.step_time_us),
            title: 'Median step time of the rank',
          },
          {
            key: 'busy',
            label: 'GPU busy',
            num: true,
            value: (x) => x.gpu_busy_share,
            cell: (x) => f.pct(x.gpu_busy_share),
          },
          { key: 'idle', label: 'Idle', num: true, value: (x) => x.idle_share, cell: (x) => f.pct(x.idle_share) },
          {
            key: 'comm',
            label: 'Exposed comm / step',
            num: true,
            value: (x) => x.exposed_communication_us_per_step,
            cell: (x) => f.dur(x.exposed_communication_us_per_step),
            title: 'Collective kernels running with no compute alongside, which includes waiting for the slowest rank',
          },
          ...distributedColumns,
          { key: 'mfu', label: 'MFU', num: true, value: (x) => x.mfu, cell: (x) => f.pct(x.mfu) },
        ],
        { testid: 'ranks-table', sortKey: 'rank', sortDesc: false },
      ),
      pending.length
        ? h(
            'p',
            { class: 'dim small', testid: 'ranks-pending' },
            `Still analysing: ${pending.map((p) => `${p.worker} (${pendingLabel(p)})`).join(', ')}. `,
            'The straggler is named once every rank is in.',
          )
        : null,
      r.clock_note ? h('p', { class: 'dim small', testid: 'clock-note' }, r.clock_note) : null,
    ],
    {
      help: 'Every rank of this run. A collective runs until all ranks join it, so the ranks that wait show it as exposed communication; the rank with the least is the one they wait for.',
      cls: 'wide',
    },
  );
}
