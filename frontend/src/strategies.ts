// Runs of one model under different parallel strategies side by side (the /compare body's
// `strategies`, diagnosis/strategies.py): the table that asks which strategy gives the best
// MFU on these GPUs. docs/distributed.md defines every column.
import { card } from './card';
import { bubbleColumn, strategyText } from './communication';
import { type Child, h } from './dom';
import * as f from './format';
import { type Column, numColumn, table } from './table';
import type { StrategyRow } from './types';

/** A figure over the ranks: the mean, and under it the lowest and highest rank's, each named. */
function overRanks(mean: string, lowest: string, highest: string): HTMLElement {
  return h(
    'div',
    { class: 'over-ranks' },
    h('div', null, mean, h('span', { class: 'dim small' }, ' mean')),
    h('div', { class: 'dim small' }, `lowest ${lowest} · highest ${highest}`),
  );
}

function mfuCell(r: StrategyRow): Child {
  if (r.mfu_mean === null) return f.NA;
  return r.ranks > 1 ? overRanks(f.pct(r.mfu_mean), f.pct(r.mfu_min), f.pct(r.mfu_max)) : f.pct(r.mfu_mean);
}

/** The job's MFU, and under it the step it is over (without the profiler), so it is derivable. */
function jobCell(r: StrategyRow): Child {
  if (r.job_mfu === null) return f.NA;
  return h(
    'div',
    null,
    h('div', null, f.pct(r.job_mfu)),
    r.job_step_time_unprofiled_us !== null
      ? h('div', { class: 'dim small' }, `over ${f.dur(r.job_step_time_unprofiled_us)}`)
      : null,
  );
}

function exposedCell(r: StrategyRow): Child {
  if (r.exposed_communication_us_per_step === null) return f.NA;
  return h(
    'div',
    null,
    h('div', null, f.dur(r.exposed_communication_us_per_step)),
    r.exposed_communication_share !== null
      ? h('div', { class: 'dim small' }, `${f.pct(r.exposed_communication_share)} of the step`)
      : null,
  );
}

/** The peak allocated memory of the ranks: the lowest and the highest rank's, each named. */
function memoryCell(r: StrategyRow): Child {
  if (r.peak_allocated_max === null) return f.NA;
  if (r.ranks < 2) return f.bytes(r.peak_allocated_max);
  return h(
    'div',
    null,
    h('div', null, f.bytes(r.peak_allocated_max), h('span', { class: 'dim small' }, ' highest')),
    h('div', { class: 'dim small' }, `lowest ${f.bytes(r.peak_allocated_min)}`),
  );
}

const STRATEGY_COLUMNS: Column<StrategyRow>[] = [
  { key: 'run', label: 'Run', value: (r) => r.run, cell: (r) => h('span', { class: 'runname' }, r.run) },
  { key: 'strategy', label: 'Strategy', value: (r) => strategyText(r.strategy) },
  numColumn('ranks', 'GPUs', (r) => r.ranks, f.counter(0)),
  numColumn(
    'step',
    'Step traced (slowest rank)',
    (r) => r.step_time_us,
    f.dur,
    "The slowest rank's step under the profiler (its mean analysed step): every rank waits for it",
  ),
  {
    key: 'job',
    label: f.label('strategies.job_mfu'),
    num: true,
    value: (r) => r.job_mfu,
    cell: jobCell,
    title: `${f.definition('strategies.job_mfu')}. Under it, the step it is over: ${f.definition('ranks.job.step_time_unprofiled_us')}; on one GPU, its own.`,
  },
  {
    key: 'mfu',
    label: f.label('strategies.mfu_min'),
    num: true,
    value: (r) => r.mfu_mean,
    cell: mfuCell,
    title: `${f.definition('strategies.mfu_min')} (${f.definition('mfu')}).`,
  },
  {
    key: 'exposed',
    label: 'Exposed comm / step',
    num: true,
    value: (r) => r.exposed_communication_us_per_step,
    cell: exposedCell,
    title: 'Collectives with no compute running, mean over ranks (share of the step)',
  },
  numColumn(
    'overlap',
    'Overlap',
    (r) => r.overlap_ratio,
    f.pct,
    'Share of communication running beside compute, mean over ranks',
  ),
  numColumn(
    'wait',
    'Waits / step',
    (r) => r.collective_wait_us_per_step,
    f.dur,
    'Time inside collectives waiting for a later rank (clocks aligned), mean over ranks',
  ),
  bubbleColumn(),
  numColumn('busbw', 'Bus bandwidth', (r) => r.busbw_gbps, f.gbps, 'The busiest collective, mean over ranks'),
  {
    key: 'memory',
    label: f.label('strategies.peak_allocated_max'),
    num: true,
    value: (r) => r.peak_allocated_max,
    cell: memoryCell,
    title: `${f.definition('strategies.peak_allocated_max')}: FSDP against DDP is largely a memory trade. ${f.NA} where the traces have no memory events.`,
  },
];

/** The strategies table of the runs picked in Compare. */
export function strategiesCard(rows: StrategyRow[]): HTMLElement {
  return card(
    'Strategies side by side',
    rows.length
      ? table<StrategyRow>(rows, STRATEGY_COLUMNS, {
          testid: 'strategies-table',
          sortKey: 'job',
          // up to eight runs of eleven columns: it scrolls in its box in a narrow window, as Compare's does
          cls: 'wrap-heads may-overflow',
          at: 'strategies',
        })
      : h('p', { class: 'muted' }, 'The runs picked are still loading.'),
    {
      testid: 'strategies',
      cls: 'wide',
      help: "One row per run picked above: the job's MFU, per-rank MFU and the costs of parallelism, from the traces alone; peak memory per rank where the traces were recorded with profile_memory=True.",
    },
  );
}
