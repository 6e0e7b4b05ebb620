import type { AdminStorage, AdminStorageProject } from '../server/admin/types.ts';
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

/**
 * A project's files: the live files its devices last reported (count and bytes) and the chunks
 * the host keeps for them; their paths only when the project is not encrypted (the host never
 * has them otherwise).
 */
function filesCell(kept: AdminStorageProject): Node {
  if (kept.folders.length === 0 && kept.chunks === 0) return h('span', { class: 'muted' }, '–');
  const files = kept.folders.reduce((sum, folder) => sum + folder.files, 0);
  const bytes = kept.folders.reduce((sum, folder) => sum + folder.bytes, 0);
  const names = kept.folders.flatMap((folder) => folder.names ?? []);
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
    names.length > 0
      ? h(
          'details',
          { class: 'file-names' },
          h('summary', {}, 'Names'),
          h('ul', { class: 'mono' }, ...names.map((name) => h('li', {}, name))),
        )
      : null,
    encrypted ? h('div', { class: 'muted' }, 'names not known to the host (encrypted)') : null,
  );
}

/** The document store: bytes in all and per user and project, against the bounds. */
export function storageView(storage: AdminStorage): Node {
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
        h('td', {}, filesCell(kept)),
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
  return h('div', {}, stats, table);
}
