// The findings of the diagnosis rules (WorkerReport.findings): id, severity, title, evidence,
// estimated gain and fix. Everything is text. The evidence is each rule's own JSON (typed
// Record<string, unknown>), so it is formatted by what its keys say and its values are.
import { card } from './card';
import { type Child, h } from './dom';
import { scope } from './field';
import * as f from './format';
import type { Finding, WorkerReport } from './types';

type Evidence = Record<string, unknown>;

function isRecord(x: unknown): x is Evidence {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** A value as display text: strings as they are, numbers and booleans spelled, others as JSON. */
function text(x: unknown): string {
  if (x === null || x === undefined) return '';
  if (typeof x === 'string') return x;
  if (typeof x === 'number' || typeof x === 'boolean') return String(x);
  return JSON.stringify(x);
}

export function prettyKey(k: string): string {
  if (k === 'us_per_step' || k === 'us') return 'Time / step';
  const t = k
    .replace(/_us_per_step$/, ' / step')
    .replace(/_per_step$/, ' / step')
    .replace(/_us$/, '')
    .replace(/_/g, ' ')
    .replace(/\bmfu\b/gi, 'MFU')
    .replace(/\bgbps\b/gi, 'GB/s')
    .replace(/\bus\b/g, 'µs');
  return t.startsWith('µ') ? t : t.charAt(0).toUpperCase() + t.slice(1);
}

/** Whether a key names its unit (so its numbers can be formatted from it alone). */
function hasUnit(k: string): boolean {
  return /(^|_)us(_|$)|bytes|gbps|flops|share|mfu|hfu|frac|ratio|efficiency|occupancy/i.test(k);
}

/** A number formatted by what its key says it is. */
export function fmtByKey(k: string, v: number): string {
  if (/(^|_)us(_|$)|_us_per_step$/.test(k)) return f.dur(v);
  if (/bytes/.test(k)) return f.bytes(v);
  if (/gbps/.test(k)) return f.gbps(v);
  if (/tflops/.test(k)) return f.BY_UNIT.tflop_rate(v);
  if (/flops/.test(k)) return f.flops(v);
  if (/(share|mfu|hfu|frac|ratio|efficiency|occupancy)/i.test(k) && Math.abs(v) <= 1.5) return f.pct(v);
  return f.count(v);
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

function valueNode(k: string, v: unknown, parent = ''): Child {
  if (!hasUnit(k) && parent && hasUnit(parent)) k = parent; // {"bytes_per_step": {"H2D": ...}}
  if (v === null || v === undefined) return h('span', { class: 'dim' }, f.NA);
  if (typeof v === 'number') return fmtByKey(k, v);
  if (typeof v === 'string' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) {
    const rows = v.filter(isRecord);
    if (v.length && rows.length === v.length) {
      const keys: string[] = [];
      for (const r of rows) for (const key of Object.keys(r)) if (!keys.includes(key)) keys.push(key);
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
              keys.map((key) =>
                h('th', { class: rows.some((r) => typeof r[key] === 'number') ? 'num' : '' }, prettyKey(key)),
              ),
            ),
          ),
          h(
            'tbody',
            null,
            rows.map((r) =>
              h(
                'tr',
                null,
                keys.map((key) =>
                  h('td', { class: typeof r[key] === 'number' ? 'num' : 'mono' }, valueNode(key, r[key] ?? null)),
                ),
              ),
            ),
          ),
        ),
      );
    }
    // a list of figures: each through format.ts, by what its key says, as a single one would be
    return v.map((x) => (typeof x === 'number' ? fmtByKey(k, x) : text(x))).join(', ');
  }
  return isRecord(v) ? evidenceList(v, k) : text(v);
}

function evidenceList(ev: Evidence, parent = ''): HTMLElement {
  const entries = Object.entries(ev).filter(([k, v]) => v !== null && k !== 'note');
  const note = typeof ev.note === 'string' ? ev.note : null;
  return h(
    'div',
    { class: 'evidence' },
    h(
      'dl',
      { class: 'facts' },
      entries.map(([k, v]) => [
        h('dt', null, prettyKey(k)),
        h('dd', { class: typeof v === 'string' ? 'mono' : '' }, valueNode(k, v, parent)),
      ]),
    ),
    note ? h('p', { class: 'dim small' }, note) : null,
  );
}

function gainNode(fd: Finding): Child {
  const after = fd.est_mfu_after;
  return h(
    'span',
    { class: 'gain', title: 'Estimated gain if fixed' },
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
