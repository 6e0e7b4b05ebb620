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

/** A table that scrolls sideways inside its card when the window is narrower than the table. */
export function scrollingTable(...children: Node[]): HTMLElement {
  return h('div', { class: 'table-scroll' }, h('table', {}, ...children));
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
