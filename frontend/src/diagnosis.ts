// The findings of the diagnosis rules (WorkerReport.findings): id, severity, title, evidence,
// estimated gain and fix. Everything is text. Each rule's evidence is its own typed struct, and
// evidence_fields.ts (generated from those structs) gives each field's label and the unit its type
// carries: every value goes through its unit's one formatter, the same text as the CLI and the notebook
// (tb_mfu_plugin/analysis/evidence/show.py).
import { card } from './card';
import { type Child, h } from './dom';
import { EVIDENCE_FIELDS, type EvidenceField, type EvidenceUnit } from './evidence_fields';
import { scope } from './field';
import * as f from './format';
import type { Finding, WorkerReport } from './types';

/** One value as text by its unit (value_text in show.py). */
export function valueText(unit: EvidenceUnit, v: unknown): string {
  if (v === null || v === undefined) return f.NA; // unknown, or not applicable (as show.py)
  switch (unit) {
    case 'text':
      return String(v);
    case 'flag':
      return v ? 'yes' : 'no';
    case 'index':
      return String(v);
    case 'shape':
      return JSON.stringify(v);
    case 'timestamp':
      return f.dur(v as number);
    default:
      return f.BY_UNIT[unit](v as number);
  }
}

/** Text with `code` spans (as in the recommendations) turned into <code> elements, safely. */
export function richText(text: string): Child[] {
  return text
    .split(/(`[^`]+`)/)
    .filter(Boolean)
    .map((part) =>
      part.startsWith('`') && part.endsWith('`') && part.length > 2 ? h('code', null, part.slice(1, -1)) : part,
    );
}

type Fields = readonly EvidenceField[];
type Values = Record<string, unknown>;

function textClass(fd: EvidenceField): string {
  return 'unit' in fd && (fd.unit === 'text' || fd.unit === 'shape') ? 'mono' : 'num';
}

/** A field's value: one value, a list, a map (one line a key), a table of rows or a block of fields. */
function valueNode(fd: EvidenceField, v: unknown): Child {
  if (v === null || v === undefined) return h('span', { class: 'dim' }, f.NA);
  switch (fd.kind) {
    case 'value':
      return valueText(fd.unit, v);
    case 'list':
      return (v as unknown[]).map((x) => valueText(fd.unit, x)).join(', ');
    case 'map':
      return h(
        'dl',
        { class: 'facts' },
        Object.entries(v as Values).map(([k, x]) => [h('dt', null, k), h('dd', null, valueText(fd.unit, x))]),
      );
    case 'block':
      return fieldList(fd.fields, v as Values);
    case 'rows':
      return rowsTable(fd.fields, v as Values[]);
  }
}

function rowsTable(fields: Fields, rows: Values[]): HTMLElement {
  // a table of evidence can be wider than its finding: it scrolls sideways in its box
  return h(
    'div',
    { class: 'table-wrap may-overflow' },
    h(
      'table',
      { class: 'grid compact ev-table' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          fields.map((fd) => h('th', { class: textClass(fd) === 'num' ? 'num' : '' }, fd.label)),
        ),
      ),
      h(
        'tbody',
        null,
        rows.map((r) =>
          h(
            'tr',
            null,
            fields.map((fd) => h('td', { class: textClass(fd), data: { key: fd.key } }, valueNode(fd, r[fd.key]))),
          ),
        ),
      ),
    ),
  );
}

/** The fields the evidence has (none of null value), each with its label, in the generated order. */
function fieldList(fields: Fields, ev: Values): HTMLElement {
  const shown = fields.filter((fd) => fd.key !== 'note' && ev[fd.key] !== null && ev[fd.key] !== undefined);
  return h(
    'dl',
    { class: 'facts' },
    shown.map((fd) => [
      h('dt', null, fd.label),
      h('dd', { class: textClass(fd) === 'mono' ? 'mono' : '', data: { key: fd.key } }, valueNode(fd, ev[fd.key])),
    ]),
  );
}

function evidenceList(ev: Finding['evidence']): HTMLElement {
  return h(
    'div',
    { class: 'evidence', testid: 'evidence', data: { rule: ev.rule } },
    fieldList(EVIDENCE_FIELDS[ev.rule], ev as unknown as Values),
    ev.note ? h('p', { class: 'dim small' }, ev.note) : null,
  );
}

function gainNode(fd: Finding): Child {
  const after = fd.est_mfu_after;
  return h(
    'span',
    {
      class: 'gain',
      title: fd.evidence.whatif
        ? 'What fixing it alone saves a run that is not profiled, and its share of the step without the profiler (the headline MFU’s step); the gain on the traced step is in the evidence (whatif)'
        : 'Estimated gain if fixed',
    },
    `saves ≈ ${f.dur(fd.est_gain_us_per_step)} / step · ${f.pct(fd.est_gain_share)} of step`,
    after !== null ? h('span', { class: 'after' }, ` → MFU ${f.pct(after)}`) : null,
  );
}

const SEVERITY_ORDER: Record<Finding['severity'], number> = { high: 1, medium: 2, low: 3 };

export function findingsCard(w: WorkerReport): HTMLElement {
  const fs = w.findings;
  if (!fs.length) {
    return card('Findings', h('p', { class: 'muted' }, 'The diagnosis rules found nothing to flag in this span.'), {
      testid: 'findings',
    });
  }
  const items = fs.map((fd, i) => {
    const sev = fd.severity;
    return h(
      'li',
      {
        class: `finding sev-${sev}`,
        data: { order: String(SEVERITY_ORDER[sev]), index: String(i), ...scope(`findings.${i}`) },
      },
      h(
        'div',
        { class: 'finding-head' },
        h('span', { class: `sev sev-${sev}` }, sev),
        h('span', { class: 'finding-title' }, fd.title),
        h('code', { class: 'finding-id' }, fd.id),
      ),
      h(
        'div',
        { class: 'finding-meta' },
        gainNode(fd),
        fd.subject ? h('span', { class: 'dim mono' }, fd.subject) : null,
      ),
      fd.recommendation ? h('p', { class: 'reco' }, h('strong', null, 'Fix: '), ...richText(fd.recommendation)) : null,
      h('details', null, h('summary', null, 'Evidence'), evidenceList(fd.evidence)),
    );
  });
  return card(`Findings (${fs.length})`, [combinedNode(w), h('ul', { class: 'findings' }, items)], {
    testid: 'findings',
    help:
      'What the diagnosis rules found, by estimated gain. Each gain is what fixing that finding alone saves: ' +
      'the gains overlap and do not add up. "All together" is the gain of fixing every one of them.',
  });
}

/** The gain of fixing every finding at once (WorkerReport.combined_gain_us_per_step). */
function combinedNode(w: WorkerReport): Child {
  const us = w.combined_gain_us_per_step;
  if (us === null || us === undefined || w.findings.length < 2) return null;
  return h(
    'p',
    { class: 'combined-gain', testid: 'combined-gain', data: scope('combined_gain_us_per_step combined_gain_share') },
    h('strong', null, `All ${w.findings.length} together: `),
    `saves ≈ ${f.dur(us)} / step · ${f.pct(w.combined_gain_share ?? null)} of step`,
    // the same words as the CLI's caption (cli/render.py): how the figure was reached
    h(
      'span',
      { class: 'dim small' },
      w.whatif?.combined
        ? ' (one re-timing of the step with every fix applied: a fix can expose or hide time for another, so the gains below do not add up to it)'
        : ' (each time counted once; the gains below overlap and do not add up)',
    ),
  );
}
