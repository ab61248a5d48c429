// What the FLOPs block says (WorkerReport.flops, analysis.mfu): why MFU is missing, the peak
// it was measured against, and how the FLOPs were counted.
import { banner, card, cardNotes } from './card';
import { type Child, h } from './dom';
import { scope } from './field';
import * as f from './format';
import { shareCell } from './table';
import type { FlopsDetail, WorkerReport } from './types';

/** Why MFU is missing, in words. */
/** Why the MFU is not a figure: the analysis' own reason (summary.mfu_status), read as it is. */
export function mfuReason(w: WorkerReport): string {
  return w.summary?.mfu_status?.reason ?? 'not computed';
}

/** Why MFU is missing, in a few words for its tile (the whole reason is mfuReason's). */
export function mfuHeadline(w: WorkerReport): string {
  if (w.flops?.impossible) return 'Above 100 %: not shown';
  const noFlops = !w.summary || !f.isNumber(w.summary.flops_per_step);
  const noPeak = !w.device || !f.isNumber(w.device.peak_flops);
  if (noFlops && noPeak) return 'No FLOP count and no peak FLOP/s';
  if (noFlops) return 'No FLOP count for this trace';
  if (noPeak) return `No peak FLOP/s known for ${w.device?.name ?? 'this GPU'}`;
  return 'Not computed';
}

const WHY_ID = 'mfu-why-detail';

/** Scrolls to why MFU is missing, in the FLOPs card. */
export function showWhy(): void {
  document.getElementById(WHY_ID)?.scrollIntoView({ behavior: 'smooth', block: 'center' });
}

/** Why MFU is missing and what to do, at the top of the FLOPs card; null when there is an MFU. */
function whyBanner(w: WorkerReport): HTMLElement | null {
  if (f.isNumber(w.summary?.mfu)) return null;
  const el = banner('warn', undefined, `Why there is no ${f.label('mfu')}`, [
    h('div', { testid: 'mfu-reason' }, mfuReason(w)),
  ]);
  el.id = WHY_ID;
  return el;
}

export function peakInfo(w: WorkerReport): { short: string; long: string } | null {
  const d = w.device;
  if (!d || !f.isNumber(d.peak_flops)) return null;
  const peak = w.flops?.peak;
  const bits = [`peak ${f.tflops(d.peak_flops)}`];
  const dtypeSource = peak?.dtype_source;
  if (d.dtype)
    bits.push(
      dtypeSource && dtypeSource !== 'shapes'
        ? `${d.dtype} (${dtypeSource === 'assumed' ? 'assumed, PaLM convention' : `from ${dtypeSource}`})`
        : d.dtype,
    );
  if (peak?.name) bits.push(peak.name + (peak.inferred ? ' (inferred)' : ''));
  return { short: bits.join(' · '), long: d.peak_source ?? bits.join(' · ') };
}

/** A fact: label, value, and what it means (the label's tooltip). */
type FactRow = [string, Child, string?];

/** Where the FLOP count comes from, and the count per step. */
function sourceRows(w: WorkerReport, fl: FlopsDetail): FactRow[] {
  const rows: FactRow[] = [];
  if (fl.headline_source) rows.push(['Source', fl.headline_source, 'Where the FLOP count behind MFU comes from']);
  else if (fl.source)
    rows.push([
      'Source',
      fl.convention ? `${fl.source} (${fl.convention} convention)` : fl.source,
      'Where the FLOP count comes from',
    ]);
  const per = fl.flops_per_step ?? w.summary?.flops_per_step ?? null;
  rows.push([f.label('flops_per_step'), f.figure('flops_per_step', per), f.definition('flops_per_step')]);
  const model = fl.model_flops_per_step;
  const executed = fl.executed_flops_per_step;
  if (executed !== null && per !== null && Math.abs(executed - per) > 1e-6 * Math.max(1, per)) {
    rows.push([
      f.label('flops.executed_flops_per_step'),
      f.figure('flops.executed_flops_per_step', executed),
      f.definition('flops.executed_flops_per_step'),
    ]);
  }
  if (model !== null && per !== null && Math.abs(model - per) > 1e-6 * Math.max(1, per)) {
    rows.push([
      f.label('flops.model_flops_per_step'),
      f.figure('flops.model_flops_per_step', model),
      f.definition('flops.model_flops_per_step'),
    ]);
  }
  return rows;
}

/** The dtypes of the counted FLOPs, of the matmul kernels, and of the peak. */
/** Where the peak's dtype came from: chosen for the compute dtype (an fp16 run's is bf16's, the 16-bit
 * peak), the option, or assumed. */
function peakDtypeFrom(source: string): string {
  if (source === 'shapes' || source === 'kernel names') return `chosen for the compute dtype, from ${source}`;
  return source === 'assumed' ? "assumed: PaLM's convention" : `from the ${source}`;
}

function precisionRows(fl: FlopsDetail): FactRow[] {
  const rows: FactRow[] = [];
  const parts = Object.entries(fl.dtype_shares)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${f.pct(v)}`);
  if (parts.length) rows.push(['Precision mix', parts.join(' · '), 'Share of counted FLOPs by compute dtype']);
  const kparts = Object.entries(fl.kernel_dtype_shares).map(([k, v]) => `${k} ${f.pct(v)}`);
  if (kparts.length)
    rows.push([
      'Kernel dtypes',
      kparts.join(' · '),
      'Matmul kernel time by the dtype their names give (kernel-name tokens)',
    ]);
  if (fl.peak.dtype) {
    rows.push([
      'Peak dtype',
      `${fl.peak.dtype} · ${peakDtypeFrom(fl.peak.dtype_source ?? 'shapes')}`,
      'Shapes, else kernel-name tokens, else the dense bf16 peak (PaLM convention)',
    ]);
  }
  return rows;
}

/** Utilisation by the other counts (HFU, no recompute, the user's FLOPs); what was approximate or not counted. */
function utilisationRows(fl: FlopsDetail): FactRow[] {
  const rows: FactRow[] = [];
  const { hfu, mfu_model: mfuModel, mfu_user: mfuUser, user_flops_per_step: user } = fl;
  if (hfu !== null) rows.push([f.label('flops.hfu'), f.figure('flops.hfu', hfu), f.definition('flops.hfu')]);
  for (const key of ['flops.mfu_at_compute_peak', 'flops.mfu_at_bf16_peak'] as const) {
    const v = key === 'flops.mfu_at_compute_peak' ? fl.mfu_at_compute_peak : fl.mfu_at_bf16_peak;
    if (f.isNumber(v)) rows.push([f.label(key), f.figure(key, v), f.definition(key)]);
  }
  if (mfuModel !== null && hfu !== null && Math.abs(mfuModel - hfu) > 1e-9)
    rows.push([f.label('flops.mfu_model'), f.figure('flops.mfu_model', mfuModel), f.definition('flops.mfu_model')]);
  if (user !== null)
    rows.push([
      'User FLOPs / step',
      `${f.flops(user)}${fl.user_flops_source ? ` · ${fl.user_flops_source}` : ''}`,
      'From --flops-per-step or the tb_mfu.json sidecar',
    ]);
  if (mfuUser !== null) rows.push(['MFU (user FLOPs)', f.pct(mfuUser)]);
  rows.push([
    'Approximate',
    `${f.pct(fl.approximate_share)} of FLOPs`,
    'Counted with approximate formulas (shapes partly unknown)',
  ]);
  if (fl.unattributed_kernel_share !== null)
    rows.push([
      'Kernel time not counted',
      f.pct(fl.unattributed_kernel_share),
      'Kernel time launched by ops without a FLOP formula',
    ]);
  return rows;
}

export function flopsCard(w: WorkerReport): HTMLElement | null {
  const fl = w.flops;
  if (!fl) {
    const why = whyBanner(w);
    return why ? card('FLOPs counted', why, { testid: 'flops-card' }) : null;
  }
  const rows = [...sourceRows(w, fl), ...precisionRows(fl), ...utilisationRows(fl)];
  const byOp = fl.by_op;
  const unTop = fl.unattributed_top;
  const maxShare = Math.max(1e-9, ...byOp.map((o) => o.flops_share));
  return card(
    'FLOPs counted',
    [
      whyBanner(w),
      h(
        'dl',
        { class: 'facts', testid: 'flops-facts', data: scope('flops summary.flops_per_step') },
        rows.map(([k, v, t]) => [h('dt', { title: t ?? '' }, k), h('dd', null, v)]),
      ),
      byOp.length
        ? h(
            'table',
            { class: 'grid compact' },
            h('thead', null, h('tr', null, h('th', null, 'Op'), h('th', { class: 'num' }, 'FLOPs share'))),
            h(
              'tbody',
              null,
              byOp.map((o, i) =>
                h(
                  'tr',
                  { data: scope(`flops.by_op.${i}`) },
                  h('td', { class: 'mono' }, o.op),
                  h('td', { class: 'num' }, shareCell(o.flops_share, maxShare)),
                ),
              ),
            ),
          )
        : null,
      unTop.length
        ? h(
            'details',
            null,
            h('summary', null, `Ops whose kernels were not counted (${unTop.length})`),
            h(
              'ul',
              { class: 'plain' },
              unTop.map((o, i) =>
                h(
                  'li',
                  { data: scope(`flops.unattributed_top.${i}`) },
                  h('span', { class: 'mono' }, o.op),
                  ` — ${f.dur(o.kernel_us)} of kernels`,
                ),
              ),
            ),
          )
        : null,
      // the note that says why MFU is missing stands in the banner above, not twice
      cardNotes(fl.notes.filter((n) => f.isNumber(w.summary?.mfu) || !mfuReason(w).includes(n))),
    ],
    { testid: 'flops-card', help: 'How the useful FLOPs behind MFU were counted, from the recorded op shapes.' },
  );
}
