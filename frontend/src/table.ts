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
  cls?: string; // more classes of the wrapper: 'may-overflow' for a table that may scroll sideways
}

function cmp(a: unknown, b: unknown): number {
  const an = a === null || a === undefined || (typeof a === 'number' && !Number.isFinite(a));
  const bn = b === null || b === undefined || (typeof b === 'number' && !Number.isFinite(b));
  if (an || bn) return an && bn ? 0 : an ? 1 : -1; // missing values last either way
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return String(a).localeCompare(String(b));
}

/** A column's header cell: its label and sort arrow; a click or Enter sorts by it. */
function headCell<T>(c: Column<T>, active: boolean, desc: boolean, sortBy: (c: Column<T>) => void): HTMLElement {
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
}

/** Sorts ``data`` in place by ``col``: missing values last in either direction. */
function sortRows<T>(data: T[], col: Column<T> | undefined, desc: boolean): void {
  if (!col) return;
  data.sort((a, b) => {
    const va = col.value(a);
    const vb = col.value(b);
    const missingA = va === null || va === undefined;
    const missingB = vb === null || vb === undefined;
    if (missingA || missingB) return cmp(va, vb);
    return desc ? -cmp(va, vb) : cmp(va, vb);
  });
}

/** The body rows of ``shown``, or one row that says there is nothing. */
function bodyRows<T>(shown: T[], columns: Column<T>[], opts: TableOptions<T>): Child {
  if (!shown.length)
    return h(
      'tr',
      null,
      h('td', { class: 'empty', props: { colSpan: columns.length } }, opts.empty ?? 'Nothing to show'),
    );
  return shown.map((r) =>
    h(
      'tr',
      opts.rowTitle ? { title: opts.rowTitle(r) } : null,
      columns.map((c) => {
        const v = c.cell ? c.cell(r) : c.value(r);
        return h(
          'td',
          { class: `${c.num ? 'num' : ''} ${c.cls ?? ''}` },
          v === null || v === undefined ? f.NA : (v as Child),
        );
      }),
    ),
  );
}

/** The filter box; ``onQuery`` gets what is typed, trimmed and lower-cased. */
function filterInput(placeholder: string | undefined, onQuery: (q: string) => void): HTMLElement {
  return h('input', {
    class: 'filter',
    props: { type: 'search', placeholder: placeholder ?? 'Filter' },
    on: { input: (ev) => onQuery((ev.target as HTMLInputElement).value.trim().toLowerCase()) },
  });
}

export function table<T>(rows: T[], columns: Column<T>[], opts: TableOptions<T> = {}): HTMLElement {
  let sortKey = opts.sortKey ?? '';
  let desc = opts.sortDesc ?? true;
  let query = '';
  let showAll = false;
  const tbody = h('tbody');
  const headRow = h('tr');
  const more = h('div', { class: 'table-more' });
  const wrap = h('div', { class: `table-wrap ${opts.cls ?? ''}`, testid: opts.testid });

  const renderHead = () => {
    replace(
      headRow,
      columns.map((c) => headCell(c, c.key === sortKey, desc, sortBy)),
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
    sortRows(data, col, desc);
    const limit = opts.maxRows && !showAll ? opts.maxRows : data.length;
    replace(tbody, bodyRows(data.slice(0, limit), columns, opts));
    const showMore = () => {
      showAll = true;
      renderBody();
    };
    replace(
      more,
      data.length > limit
        ? h('button', { class: 'link', on: { click: showMore } }, `Show all ${data.length} rows`)
        : null,
    );
  };

  renderHead();
  renderBody();
  const filterBox = opts.filter
    ? filterInput(opts.filterPlaceholder, (q) => {
        query = q;
        renderBody();
      })
    : null;
  wrap.append(
    ...([filterBox, h('table', { class: 'grid' }, h('thead', null, headRow), tbody), more].filter(Boolean) as Node[]),
  );
  return wrap;
}

/** A right-aligned number column, sorted by the number and shown through ``fmt``. */
export function numColumn<T, V extends number | null | undefined>(
  key: string,
  label: string,
  value: (row: T) => V,
  fmt: (x: V) => Child,
  title?: string,
): Column<T> {
  return { key, label, num: true, value, cell: (r) => fmt(value(r)), title };
}

/** A kernel's (or op's) name in monospace, cut to the cell with the whole name as its tooltip. */
export function kernelNameColumn<T extends { name: string }>(): Column<T> {
  return {
    key: 'name',
    label: 'Kernel',
    value: (r) => r.name,
    cell: (r) => h('span', { class: 'kname mono may-overflow', title: r.name }, r.name),
    cls: 'kcell',
  };
}

/** The filter of a table of kernels: by a part of the name. */
export const kernelFilter = {
  filter: (r: { name: string }, q: string) => r.name.toLowerCase().includes(q),
  filterPlaceholder: 'Filter kernels by name',
};

/** The head of a plain (unsorted) table: the first column's label, then right-aligned figures'. */
export function plainHead(first: string, ...figures: string[]): HTMLElement {
  return h(
    'thead',
    null,
    h(
      'tr',
      null,
      h('th', null, first),
      figures.map((t) => h('th', { class: 'num' }, t)),
    ),
  );
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
