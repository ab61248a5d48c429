// Runs of one model under different parallel strategies side by side (the /compare body's
// `strategies`, diagnosis/strategies.py): the table that asks which strategy gives the best
// MFU on these GPUs. docs/distributed.md defines every column.
import { card } from './card';
import { strategyText } from './communication';
import { h } from './dom';
import * as f from './format';
import { table } from './table';
import type { StrategyRow } from './types';

function mfuCell(r: StrategyRow): string {
  if (r.mfu_mean === null) return f.NA;
  return r.ranks > 1 ? `${f.pct(r.mfu_min)} / ${f.pct(r.mfu_mean)} / ${f.pct(r.mfu_max)}` : f.pct(r.mfu_mean);
}

function exposedCell(r: StrategyRow): string {
  if (r.exposed_communication_us_per_step === null) return '—';
  const share = r.exposed_communication_share !== null ? ` (${f.pct(r.exposed_communication_share)})` : '';
  return `${f.dur(r.exposed_communication_us_per_step)}${share}`;
}

/** The strategies table of the runs picked in Compare. */
export function strategiesCard(rows: StrategyRow[]): HTMLElement {
  return card(
    'Strategies side by side',
    rows.length
      ? table<StrategyRow>(
          rows,
          [
            { key: 'run', label: 'Run', value: (r) => r.run, cell: (r) => h('span', { class: 'runname' }, r.run) },
            { key: 'strategy', label: 'Strategy', value: (r) => strategyText(r.strategy) },
            { key: 'ranks', label: 'GPUs', num: true, value: (r) => r.ranks, cell: (r) => f.count(r.ranks, 0) },
            {
              key: 'step',
              label: 'Step (slowest rank)',
              num: true,
              value: (r) => r.step_time_us,
              cell: (r) => f.dur(r.step_time_us),
              title: "The slowest rank's median step: every rank waits for it",
            },
            {
              key: 'mfu',
              label: 'MFU per rank',
              num: true,
              value: (r) => r.mfu_mean,
              cell: mfuCell,
              title: 'Lowest / mean / highest over the ranks: the FLOPs each rank executes / its step / peak',
            },
            {
              key: 'exposed',
              label: 'Exposed comm / step',
              num: true,
              value: (r) => r.exposed_communication_us_per_step,
              cell: exposedCell,
              title: 'Collectives with no compute running, mean over ranks (share of the step)',
            },
            {
              key: 'overlap',
              label: 'Overlap',
              num: true,
              value: (r) => r.overlap_ratio,
              cell: (r) => f.pct(r.overlap_ratio),
              title: 'Share of communication running beside compute, mean over ranks',
            },
            {
              key: 'wait',
              label: 'Waits / step',
              num: true,
              value: (r) => r.collective_wait_us_per_step,
              cell: (r) => f.dur(r.collective_wait_us_per_step),
              title: 'Time inside collectives waiting for a later rank (clocks aligned), mean over ranks',
            },
            {
              key: 'bubble',
              label: 'Bubble',
              num: true,
              value: (r) => r.bubble_share,
              cell: (r) => (r.bubble_share === null ? '—' : f.pct(r.bubble_share)),
              title: 'Pipeline stages: send/recv with nothing to compute, share of the step',
            },
            {
              key: 'busbw',
              label: 'Bus bandwidth',
              num: true,
              value: (r) => r.busbw_gbps,
              cell: (r) => f.gbps(r.busbw_gbps),
              title: 'The busiest collective, mean over ranks',
            },
          ],
          { testid: 'strategies-table', sortKey: 'mfu' },
        )
      : h('p', { class: 'muted' }, 'The runs picked are still loading.'),
    {
      testid: 'strategies',
      cls: 'wide',
      help: 'One row per run picked above: per-rank MFU and the costs of parallelism, from the traces alone. Memory is not shown: traces carry it only with profile_memory=True.',
    },
  );
}
