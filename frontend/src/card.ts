// One titled card of the tab, shared by every panel: a <section> with a header (title,
// a "?" whose tooltip says what the card shows, and optional extra nodes) over a body;
// and the banner across the page that says what went wrong or is still coming.
import { type Child, h, ICONS, icon } from './dom';

export interface CardOptions {
  testid?: string;
  cls?: string;
  help?: string;
  extra?: Child;
}

export function card(title: string, body: Child, opts: CardOptions = {}): HTMLElement {
  return h(
    'section',
    { class: `card ${opts.cls ?? ''}`, testid: opts.testid },
    h(
      'header',
      { class: 'card-head' },
      h('h2', null, title),
      opts.help ? h('span', { class: 'help', title: opts.help }, '?') : null,
      opts.extra ?? null,
    ),
    h('div', { class: 'card-body' }, body),
  );
}

/** The caveats under a card's body, dimmed; nothing when there are none. */
export function cardNotes(notes: string[]): HTMLElement | null {
  return notes.length
    ? h(
        'ul',
        { class: 'plain dim' },
        notes.map((n) => h('li', null, n)),
      )
    : null;
}

/** A banner: a mark (by default the kind's icon), a bold line, and the lines under it. */
export function banner(
  kind: 'error' | 'warn' | 'info',
  testid: string | undefined,
  title: string,
  lines: Child,
  mark: Node = icon(ICONS[kind], 16),
): HTMLElement {
  return h('div', { class: `banner ${kind}`, testid }, mark, h('div', null, h('strong', null, title), lines));
}
