// One titled card of the tab, shared by every panel: a <section> with a header (title,
// a "?" whose tooltip says what the card shows, and optional extra nodes) over a body.
import { type Child, h } from './dom';

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
