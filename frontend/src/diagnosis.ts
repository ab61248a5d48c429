// The findings of the diagnosis rules (WorkerReport.findings): id, severity, title, evidence,
// estimated gain and fix. Everything is text; evidence is formatted by what its keys say.
import { card } from './card';
import { type Child, h } from './dom';
import * as f from './format';
import { num, str } from './json';
import type { Json, JsonObject, WorkerReport } from './types';

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
  if (/tflops/.test(k)) return `${f.count(v, 1)} TFLOP/s`;
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

function valueNode(k: string, v: Json, parent = ''): Child {
  if (!hasUnit(k) && parent && hasUnit(parent)) k = parent; // {"bytes_per_step": {"H2D": ...}}
  if (v === null || v === undefined) return h('span', { class: 'dim' }, '—');
  if (typeof v === 'number') return fmtByKey(k, v);
  if (typeof v === 'string' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) {
    if (v.length && v.every((x) => x && typeof x === 'object' && !Array.isArray(x))) {
      const rows = v as JsonObject[];
      const keys: string[] = [];
      for (const r of rows) for (const key of Object.keys(r)) if (!keys.includes(key)) keys.push(key);
      return h(
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
      );
    }
    return v.map((x) => str(x)).join(', ');
  }
  return evidenceList(v as JsonObject, k);
}

function evidenceList(ev: JsonObject, parent = ''): HTMLElement {
  const entries = Object.entries(ev).filter(([k, v]) => v !== null && k !== 'note');
  const note = typeof ev.note === 'string' ? (ev.note as string) : null;
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

function evidenceNode(ev: Json | undefined): Child {
  if (ev === undefined || ev === null) return null;
  if (typeof ev === 'string') return h('p', null, ev);
  if (Array.isArray(ev)) return valueNode('evidence', ev);
  if (typeof ev === 'object') return evidenceList(ev);
  return h('p', null, String(ev));
}

function gainNode(fd: JsonObject): Child {
  const us = num(fd.est_gain_us_per_step);
  const share = num(fd.est_gain_share);
  const after = num(fd.est_mfu_after);
  const bits: string[] = [];
  if (us !== null) bits.push(`${f.dur(us)} / step`);
  if (share !== null) bits.push(`${f.pct(share)} of step`);
  if (!bits.length) {
    for (const [k, v] of Object.entries(fd)) if (/gain/.test(k) && typeof v === 'number') bits.push(fmtByKey(k, v));
  }
  if (!bits.length && after === null) return null;
  return h(
    'span',
    { class: 'gain', title: 'Estimated gain if fixed' },
    bits.length ? `saves ≈ ${bits.join(' · ')}` : null,
    after !== null ? h('span', { class: 'after' }, ` → MFU ${f.pct(after)}`) : null,
  );
}

const SEVERITY_ORDER: Record<string, number> = { critical: 0, high: 1, medium: 2, low: 3, info: 4 };

export function findingsCard(w: WorkerReport): HTMLElement {
  const fs = w.findings ?? [];
  if (!fs.length) {
    return card('Findings', h('p', { class: 'muted' }, 'The diagnosis rules found nothing to flag in this span.'), {
      testid: 'findings',
    });
  }
  const items = fs.map((fd, i) => {
    const sev = String(fd.severity ?? 'info')
      .toLowerCase()
      .replace(/[^a-z]/g, '');
    const reco = str(fd.recommendation as Json) ?? str(fd.fix as Json);
    const subject = str(fd.subject as Json);
    return h(
      'li',
      { class: `finding sev-${sev}`, data: { order: String(SEVERITY_ORDER[sev] ?? 5), index: String(i) } },
      h(
        'div',
        { class: 'finding-head' },
        h('span', { class: `sev sev-${sev}` }, sev),
        h('span', { class: 'finding-title' }, str(fd.title as Json) ?? str(fd.id as Json) ?? 'Finding'),
        fd.id ? h('code', { class: 'finding-id' }, String(fd.id)) : null,
      ),
      h('div', { class: 'finding-meta' }, gainNode(fd), subject ? h('span', { class: 'dim mono' }, subject) : null),
      reco ? h('p', { class: 'reco' }, h('strong', null, 'Fix: '), ...richText(reco)) : null,
      fd.evidence !== undefined && fd.evidence !== null
        ? h('details', null, h('summary', null, 'Evidence'), evidenceNode(fd.evidence as Json))
        : null,
    );
  });
  return card(`Findings (${fs.length})`, h('ul', { class: 'findings' }, items), {
    testid: 'findings',
    help: 'What the diagnosis rules found, by estimated gain. Gains of different findings can overlap.',
  });
}
