// A small sortable table. Cells are text (or nodes built with h()), never HTML.
import { type Child, h, replace } from './dom';
import * as f from './format';

export interface Column<T> {
  key: string;
  label: string;
  title?: string; // header tooltip: what the column means, with its unit
  num?: boolean; // right-aligned, sorts descending first
  value: (row: T) => number | string | null | undefined | boolean; // sort key
  cell?: (row: T) => Child; // display; defaults to String(value)
  cls?: string;
}

export interface TableOptions<T> {
  testid?: string;
  sortKey?: string;
  sortDesc?: boolean;
  rowTitle?: (row: T) => string;
  empty?: string;
  maxRows?: number;
  filter?: (row: T, q: string) => boolean; // shows a filter box when set
  filterPlaceholder?: string;
}

function cmp(a: unknown, b: unknown): number {
  const an = a === null || a === undefined || (typeof a === 'number' && !Number.isFinite(a));
  const bn = b === null || b === undefined || (typeof b === 'number' && !Number.isFinite(b));
  if (an || bn) return an && bn ? 0 : an ? 1 : -1; // missing values last either way
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return String(a).localeCompare(String(b));
}

export function table<T>(rows: T[], columns: Column<T>[], opts: TableOptions<T> = {}): HTMLElement {
  let sortKey = opts.sortKey ?? '';
  let desc = opts.sortDesc ?? true;
  let query = '';
  let showAll = false;
  const tbody = h('tbody');
  const headRow = h('tr');
  const more = h('div', { class: 'table-more' });
  const wrap = h('div', { class: 'table-wrap', testid: opts.testid });

  const renderHead = () => {
    replace(
      headRow,
      columns.map((c) => {
        const active = c.key === sortKey;
        const arrow = active ? (desc ? ' ▼' : ' ▲') : '';
        return h(
          'th',
          {
            class: `${c.num ? 'num' : ''} sortable ${active ? 'sorted' : ''}`,
            title: c.title ?? `Sort by ${c.label}`,
            props: { tabIndex: 0 },
            attrs: { 'aria-sort': active ? (desc ? 'descending' : 'ascending') : 'none', role: 'columnheader' },
            data: { key: c.key },
            on: {
              click: () => sortBy(c),
              keydown: (ev) => {
                if ((ev as KeyboardEvent).key === 'Enter') sortBy(c);
              },
            },
          },
          c.label,
          h('span', { class: 'arrow' }, arrow),
        );
      }),
    );
  };

  const sortBy = (c: Column<T>) => {
    if (sortKey === c.key) desc = !desc;
    else {
      sortKey = c.key;
      desc = !!c.num;
    }
    renderHead();
    renderBody();
  };

  const renderBody = () => {
    let data = rows.slice();
    const keep = opts.filter;
    if (query && keep) data = data.filter((r) => keep(r, query));
    const col = columns.find((c) => c.key === sortKey);
    if (col) {
      data.sort((a, b) => {
        const va = col.value(a);
        const vb = col.value(b);
        const missingA = va === null || va === undefined;
        const missingB = vb === null || vb === undefined;
        if (missingA || missingB) return cmp(va, vb);
        return desc ? -cmp(va, vb) : cmp(va, vb);
      });
    }
    const limit = opts.maxRows && !showAll ? opts.maxRows : data.length;
    const shown = data.slice(0, limit);
    replace(
      tbody,
      shown.length
        ? shown.map((r) =>
            h(
              'tr',
              opts.rowTitle ? { title: opts.rowTitle(r) } : null,
              columns.map((c) => {
                const v = c.cell ? c.cell(r) : c.value(r);
                return h(
                  'td',
                  { class: `${c.num ? 'num' : ''} ${c.cls ?? ''}` },
                  v === null || v === undefined ? '—' : (v as Child),
                );
              }),
            ),
          )
        : h(
            'tr',
            null,
            h('td', { class: 'empty', props: { colSpan: columns.length } }, opts.empty ?? 'Nothing to show'),
          ),
    );
    replace(
      more,
      data.length > limit
        ? h(
            'button',
            {
              class: 'link',
              on: {
                click: () => {
                  showAll = true;
                  renderBody();
                },
              },
            },
            `Show all ${data.length} rows`,
          )
        : null,
    );
  };

  renderHead();
  renderBody();
  const filterBox = opts.filter
    ? h('input', {
        class: 'filter',
        props: { type: 'search', placeholder: opts.filterPlaceholder ?? 'Filter' },
        on: {
          input: (ev) => {
            query = (ev.target as HTMLInputElement).value.trim().toLowerCase();
            renderBody();
          },
        },
      })
    : null;
  wrap.append(
    ...([filterBox, h('table', { class: 'grid' }, h('thead', null, headRow), tbody), more].filter(Boolean) as Node[]),
  );
  return wrap;
}

/** A share as text over a bar as long as its part of ``max``. */
export function shareCell(x: number, max: number): HTMLElement {
  return h(
    'span',
    { class: 'sharecell' },
    h('span', { class: 'sharebar', style: { width: `${Math.min(100, (x / max) * 100).toFixed(1)}%` } }),
    h('span', { class: 'shareval' }, f.pct(x)),
  );
}
