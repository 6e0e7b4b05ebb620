import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Whether `text` holds `marker`, as is or in any base64 run. */
export function exposes(text: string, marker: string): boolean {
  if (text.includes(marker)) return true;
  for (const run of text.match(/[A-Za-z0-9+/]{8,}={0,2}/g) ?? []) {
    if (Buffer.from(run, 'base64').toString('latin1').includes(marker)) return true;
  }
  return false;
}

/** The SQLite files whose names start with `prefix` (database, journal, WAL) as they are on disk. */
export function sqliteFilesText(dataDir: string, prefix: string): string {
  return readdirSync(dataDir)
    .filter((name) => name.startsWith(prefix))
    .map((name) => readFileSync(join(dataDir, name)).toString('latin1'))
    .join('\n');
}

/** What the document store keeps on disk: store.db's SQLite files and the chunk files beside it. */
export function storeFilesText(dataDir: string): string {
  const chunks = join(dataDir, 'chunks');
  const files = existsSync(chunks)
    ? readdirSync(chunks, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => readFileSync(join(entry.parentPath, entry.name)).toString('latin1'))
    : [];
  return [sqliteFilesText(dataDir, 'store.db'), ...files].join('\n');
}
