// What the FLOPs block says (WorkerReport.flops, analysis.mfu): why MFU is missing, the peak
// it was measured against, and how the FLOPs were counted. The block is still untyped JSON
// (see types.ts), so its keys are read here and nowhere else.
import { card, cardNotes } from './card';
import { type Child, h } from './dom';
import * as f from './format';
import { num, str } from './json';
import { shareCell } from './table';
import type { Json, JsonObject, WorkerReport } from './types';

/** Why MFU is missing, in words. */
export function mfuReason(w: WorkerReport): string {
  const s = w.summary;
  const fl = w.flops ?? {};
  const given = str(fl.reason as Json) ?? str(fl.error as Json);
  if (given) return given;
  const impossible = fl.impossible as JsonObject | undefined;
  if (impossible && typeof impossible === 'object') {
    return `Impossible: above 100 %, so not shown. Likely cause: ${str(impossible.explanation as Json) ?? 'the peak, the FLOPs or the step'}`;
  }
  const parts: string[] = [];
  if (!s || !f.isNumber(s.flops_per_step)) {
    const notes = Array.isArray(fl.notes) ? (fl.notes as Json[]).map((n) => str(n) ?? '') : [];
    parts.push(
      notes.find((n) => /flop/i.test(n)) ??
        'no FLOP count: record with record_shapes=True, or give FLOPs per step (tb_mfu.json sidecar)',
    );
  }
  if (!w.device || !f.isNumber(w.device.peak_flops)) {
    const peak = fl.peak as JsonObject | undefined;
    parts.push(
      str(peak?.source as Json) ??
        `no peak FLOP/s known for ${w.device?.name ?? 'this device'} (set --mfu_peak_tflops)`,
    );
  }
  return parts.join('; ') || 'not computed';
}

export function peakInfo(w: WorkerReport): { short: string; long: string } | null {
  const d = w.device;
  if (!d || !f.isNumber(d.peak_flops)) return null;
  const peak = (w.flops?.peak ?? null) as JsonObject | null;
  const name = peak ? str(peak.name as Json) : null;
  const inferred = peak?.inferred === true;
  const bits = [`peak ${f.tflops(d.peak_flops)}`];
  const dtypeSource = peak ? str(peak.dtype_source as Json) : null;
  if (d.dtype)
    bits.push(
      dtypeSource && dtypeSource !== 'shapes'
        ? `${d.dtype} (${dtypeSource === 'assumed' ? 'assumed, PaLM convention' : `from ${dtypeSource}`})`
        : d.dtype,
    );
  if (name) bits.push(name + (inferred ? ' (inferred)' : ''));
  return { short: bits.join(' · '), long: d.peak_source ?? bits.join(' · ') };
}

/** A fact: label, value, and what it means (the label's tooltip). */
type FactRow = [string, Child, string?];

/** Where the FLOP count comes from, and the count per step. */
function sourceRows(w: WorkerReport, fl: JsonObject): FactRow[] {
  const rows: FactRow[] = [];
  const head = str(fl.headline_source as Json);
  const src = str(fl.source as Json);
  const conv = str(fl.convention as Json);
  if (head) rows.push(['Source', head, 'Where the FLOP count behind MFU comes from']);
  else if (src) rows.push(['Source', conv ? `${src} (${conv} convention)` : src, 'Where the FLOP count comes from']);
  const per = num(fl.flops_per_step as Json) ?? w.summary?.flops_per_step ?? null;
  rows.push(['FLOPs / step', f.flops(per)]);
  const model = num(fl.model_flops_per_step as Json);
  if (model !== null && per !== null && Math.abs(model - per) > 1e-6 * Math.max(1, per)) {
    rows.push([
      'Model FLOPs / step',
      f.flops(model),
      'Without recomputation (activation checkpointing, attention backward)',
    ]);
  }
  return rows;
}

/** The dtypes of the counted FLOPs, of the matmul kernels, and of the peak. */
function precisionRows(fl: JsonObject): FactRow[] {
  const rows: FactRow[] = [];
  const shares = fl.dtype_shares;
  if (shares && typeof shares === 'object' && !Array.isArray(shares)) {
    const parts = Object.entries(shares)
      .filter(([, v]) => typeof v === 'number')
      .sort((a, b) => (b[1] as number) - (a[1] as number))
      .map(([k, v]) => `${k} ${f.pct(v as number)}`);
    if (parts.length) rows.push(['Precision mix', parts.join(' · '), 'Share of counted FLOPs by compute dtype']);
  } else {
    const dtype = str(fl.dtype as Json);
    if (dtype) rows.push(['Precision', dtype]);
  }
  const kshares = fl.kernel_dtype_shares;
  if (kshares && typeof kshares === 'object' && !Array.isArray(kshares)) {
    const parts = Object.entries(kshares)
      .filter(([, v]) => typeof v === 'number')
      .map(([k, v]) => `${k} ${f.pct(v as number)}`);
    if (parts.length)
      rows.push([
        'Kernel dtypes',
        parts.join(' · '),
        'Matmul kernel time by the dtype their names give (kernel-name tokens)',
      ]);
  }
  const peakFacts = fl.peak as JsonObject | undefined;
  if (peakFacts && typeof peakFacts === 'object' && str(peakFacts.dtype as Json)) {
    rows.push([
      'Peak dtype',
      `${str(peakFacts.dtype as Json)} from ${str(peakFacts.dtype_source as Json) ?? 'shapes'}`,
      'Shapes, else kernel-name tokens, else the dense bf16 peak (PaLM convention)',
    ]);
  }
  return rows;
}

/** Utilisation by the other counts (HFU, no recompute, the user's FLOPs); what was approximate or not counted. */
function utilisationRows(fl: JsonObject): FactRow[] {
  const rows: FactRow[] = [];
  const hfu = num(fl.hfu as Json);
  const mfuModel = num(fl.mfu_model as Json);
  const mfuUser = num(fl.mfu_user as Json);
  const user = num(fl.user_flops_per_step as Json);
  if (hfu !== null)
    rows.push(['HFU (all counted FLOPs)', f.pct(hfu), 'Hardware FLOPs utilisation: includes recomputed work']);
  if (mfuModel !== null && hfu !== null && Math.abs(mfuModel - hfu) > 1e-9)
    rows.push(['MFU without recompute', f.pct(mfuModel)]);
  if (user !== null)
    rows.push([
      'User FLOPs / step',
      `${f.flops(user)}${str(fl.user_flops_source as Json) ? ` · ${str(fl.user_flops_source as Json)}` : ''}`,
      'From --flops-per-step or the tb_mfu.json sidecar',
    ]);
  if (mfuUser !== null) rows.push(['MFU (user FLOPs)', f.pct(mfuUser)]);
  const approx = num(fl.approximate_share as Json);
  if (approx !== null)
    rows.push([
      'Approximate',
      `${f.pct(approx)} of FLOPs`,
      'Counted with approximate formulas (shapes partly unknown)',
    ]);
  const un = num(fl.unattributed_kernel_share as Json);
  if (un !== null)
    rows.push(['Kernel time not counted', f.pct(un), 'Kernel time launched by ops without a FLOP formula']);
  return rows;
}

export function flopsCard(w: WorkerReport): HTMLElement | null {
  const fl = w.flops;
  if (!fl) return null;
  const rows = [...sourceRows(w, fl), ...precisionRows(fl), ...utilisationRows(fl)];
  const byOp = Array.isArray(fl.by_op) ? (fl.by_op as JsonObject[]).filter((o) => o && typeof o === 'object') : [];
  const unTop = Array.isArray(fl.unattributed_top)
    ? (fl.unattributed_top as JsonObject[]).filter((o) => o && typeof o === 'object')
    : [];
  const notes = Array.isArray(fl.notes) ? (fl.notes as Json[]).map((n) => str(n) ?? '') : [];
  const maxShare = Math.max(1e-9, ...byOp.map((o) => num(o.flops_share) ?? 0));
  return card(
    'FLOPs counted',
    [
      h(
        'dl',
        { class: 'facts', testid: 'flops-facts' },
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
              byOp.map((o) =>
                h(
                  'tr',
                  null,
                  h('td', { class: 'mono' }, str(o.op) ?? '?'),
                  h('td', { class: 'num' }, shareCell(num(o.flops_share) ?? 0, maxShare)),
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
              unTop.map((o) =>
                h(
                  'li',
                  null,
                  h('span', { class: 'mono' }, str(o.op) ?? '?'),
                  ` — ${f.dur(num(o.kernel_us))} of kernels`,
                ),
              ),
            ),
          )
        : null,
      cardNotes(notes),
    ],
    { testid: 'flops-card', help: 'How the useful FLOPs behind MFU were counted, from the recorded op shapes.' },
  );
}
