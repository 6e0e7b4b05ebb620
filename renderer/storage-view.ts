import type {
  AdminFolderReport,
  AdminStorage,
  AdminStorageProject,
} from '../server/admin/types.ts';
import { h } from './dom.ts';
import { empty, scrollingTable, time } from './widgets.ts';

/** "1.5 MiB", "320 B": a size for tables. */
export function byteSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  const digits = unit === 0 || value >= 100 ? 0 : 1;
  return `${value.toFixed(digits)} ${units[unit]}`;
}

function projectCell(kept: AdminStorageProject): Node {
  if (kept.project === null) {
    return h(
      'span',
      { class: 'muted', title: kept.room },
      'removed project (freed at the next sweep)',
    );
  }
  return h(
    'span',
    {},
    h('strong', {}, kept.project.name),
    ' ',
    h('span', { class: 'mono muted', title: 'Project key' }, kept.project.projectKey),
  );
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/** What the storage section asks of the page: a folder's names, another page of projects. */
export interface StorageActions {
  names(room: string, doc: string): Promise<string[]>;
  page(offset: number): void;
}

/**
 * A folder's names, asked of the host when the list is opened (the storage lists only how
 * many each report holds).
 */
function namesList(room: string, folders: AdminFolderReport[], actions: StorageActions): Node {
  const list = h('ul', { class: 'mono' });
  const named = folders.filter((folder) => folder.named > 0);
  let asked = false;
  const details = h(
    'details',
    {
      class: 'file-names',
      ontoggle: () => {
        if (asked || !details.open) return;
        asked = true;
        void Promise.all(named.map((folder) => actions.names(room, folder.doc))).then(
          (lists) => list.replaceChildren(...lists.flat().map((name) => h('li', {}, name))),
          () => list.replaceChildren(h('li', { class: 'muted' }, 'could not read the names')),
        );
      },
    },
    h('summary', {}, 'Names'),
    list,
  );
  return details;
}

/**
 * A project's files: the live files its devices last reported (count and bytes) and the chunks
 * the host keeps for them; their paths only when the project is not encrypted (the host never
 * has them otherwise).
 */
function filesCell(kept: AdminStorageProject, actions: StorageActions): Node {
  if (kept.folders.length === 0 && kept.chunks === 0) return h('span', { class: 'muted' }, '–');
  const files = kept.folders.reduce((sum, folder) => sum + folder.files, 0);
  const bytes = kept.folders.reduce((sum, folder) => sum + folder.bytes, 0);
  const named = kept.folders.reduce((sum, folder) => sum + folder.named, 0);
  const encrypted = kept.folders.some((folder) => folder.encrypted);
  const newest = kept.folders
    .map((f) => f.reportedAt)
    .sort()
    .at(-1);
  return h(
    'div',
    { class: 'files', 'data-files': files, 'data-file-bytes': bytes },
    kept.folders.length === 0 ? 'not reported yet' : `${plural(files, 'file')}, ${byteSize(bytes)}`,
    h(
      'div',
      { class: 'muted', 'data-chunk-bytes': kept.chunkBytes },
      `${byteSize(kept.chunkBytes)} in ${plural(kept.chunks, 'chunk')} on the host`,
      newest === undefined ? null : ', reported ',
      newest === undefined ? null : time(newest),
    ),
    named > 0 ? namesList(kept.room, kept.folders, actions) : null,
    encrypted ? h('div', { class: 'muted' }, 'names not known to the host (encrypted)') : null,
  );
}

/** The document store: bytes in all and per user and project, against the bounds. */
export function storageView(storage: AdminStorage, actions: StorageActions): Node {
  if (storage.state === 'absent') {
    return empty('This process runs the auth service only: the documents are kept by the relay.');
  }
  if (storage.state === 'paused') {
    return empty('The relay is paused from the tray app: its document store is closed.');
  }
  if (storage.state === 'unavailable') {
    return empty('This relay keeps no documents (a cluster node): devices sync with each other.');
  }
  const of = (limit: number | null) => (limit === null ? '' : ` of ${byteSize(limit)}`);
  const stats = h(
    'div',
    { class: 'stats' },
    h(
      'div',
      { class: 'stat' },
      h('strong', { 'data-stat': 'stored' }, byteSize(storage.bytes)),
      `stored${of(storage.maxBytes)}`,
    ),
    h(
      'div',
      { class: 'stat' },
      h('strong', {}, storage.userMaxBytes === null ? '–' : byteSize(storage.userMaxBytes)),
      'per user at most',
    ),
  );
  const rows = storage.users.flatMap((user) =>
    user.projects.map((kept) =>
      h(
        'tr',
        { 'data-room': kept.room },
        h('td', {}, projectCell(kept)),
        h(
          'td',
          { class: 'email' },
          user.email ?? h('span', { class: 'muted' }, `deleted user #${user.userId}`),
        ),
        h('td', { class: 'num' }, kept.documents),
        h('td', {}, filesCell(kept, actions)),
        h('td', { class: 'num', 'data-bytes': kept.bytes }, byteSize(kept.bytes)),
        h(
          'td',
          { class: 'num', title: 'All of this user’s projects' },
          `${byteSize(user.bytes)}${of(storage.userMaxBytes)}`,
        ),
      ),
    ),
  );
  const table =
    rows.length === 0
      ? empty('No document is stored yet.')
      : scrollingTable(
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'Project'),
              h('th', {}, 'User'),
              h('th', { class: 'num' }, 'Documents'),
              h('th', {}, 'Files'),
              h('th', { class: 'num' }, 'Stored'),
              h('th', { class: 'num' }, 'User in all'),
            ),
          ),
          h('tbody', {}, ...rows),
        );
  return h('div', {}, stats, table, pager(storage.page, actions));
}

/** "Projects 51–100 of 230" with the buttons to the pages before and after; none for one page. */
function pager(page: AdminStorage['page'], actions: StorageActions): Node | null {
  if (page.offset === 0 && page.projects <= page.limit) return null;
  const last = Math.min(page.offset + page.limit, page.projects);
  return h(
    'div',
    { class: 'pager', 'data-projects': page.projects },
    h(
      'button',
      {
        type: 'button',
        'data-key': 'storage-previous',
        disabled: page.offset === 0,
        onclick: () => actions.page(Math.max(0, page.offset - page.limit)),
      },
      'Previous',
    ),
    ` Projects ${page.projects === 0 ? 0 : page.offset + 1}–${last} of ${page.projects} `,
    h(
      'button',
      {
        type: 'button',
        'data-key': 'storage-next',
        disabled: last >= page.projects,
        onclick: () => actions.page(page.offset + page.limit),
      },
      'Next',
    ),
  );
}
