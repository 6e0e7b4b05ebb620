import { copyText, h } from './dom.ts';
import { dateTime, relativeTime } from './format.ts';

/** A muted sentence shown where a section has nothing to list. */
export const empty = (text: string) => h('p', { class: 'empty' }, text);

/** A relative time ("3 min ago") with the exact time as its title; refreshed by `updateTimes`. */
export function time(iso: string): HTMLElement {
  return h('time', { datetime: iso, title: dateTime(iso) }, relativeTime(iso));
}

/** Brings every relative time on the page up to date (ages keep counting between renders). */
export function updateTimes(root: ParentNode = document): void {
  for (const el of root.querySelectorAll('time[datetime]')) {
    const iso = el.getAttribute('datetime');
    if (iso) el.textContent = relativeTime(iso);
  }
}

/**
 * A table that turns into one card per row on a narrow window (app.css, below 600 px): each cell
 * shows its column's heading as a label beside its value, so every button stays on screen.
 * Wider, it scrolls sideways inside its section when the window is narrower than the table, with a
 * shadow at the edge that has more. Cells get their heading as `data-label`, and their content a
 * wrapper the card layout places beside it; the roles keep it a table for screen readers, which
 * drop table semantics from `display: block` rows.
 */
export function scrollingTable(head: HTMLElement, body: HTMLElement): HTMLElement {
  const table = h('table', { role: 'table' }, head, body);
  const headings = [...head.querySelectorAll('th')].map((th) => th.textContent ?? '');
  for (const th of head.querySelectorAll('th')) th.setAttribute('role', 'columnheader');
  for (const group of [head, body]) group.setAttribute('role', 'rowgroup');
  for (const row of table.querySelectorAll('tr')) {
    row.setAttribute('role', 'row');
    row.querySelectorAll('td').forEach((td, i) => {
      td.setAttribute('role', 'cell');
      const label = headings[i];
      if (label) td.dataset.label = label;
      const value = h('div', { class: 'cell-value' });
      value.append(...td.childNodes);
      td.append(value);
    });
  }
  return h('div', { class: 'table-scroll' }, table);
}

/** A button that copies `text` and says so next to itself. */
export function copyButton(text: string, label: string, key: string): HTMLElement {
  const status = h('span', { class: 'status-text', role: 'status' });
  const button = h(
    'button',
    {
      type: 'button',
      'data-key': key,
      onClick: () => {
        void copyText(text).then((ok) => {
          status.textContent = ok ? 'Copied' : 'Copy failed: select the text and copy it';
          setTimeout(() => {
            status.textContent = '';
          }, 2_000);
        });
      },
    },
    label,
  );
  return h('span', { class: 'row-actions' }, button, status);
}
