import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';

/** One chunk as store.db keeps it: its row, and its bytes (from its file, or from an old row). */
export interface StoredChunk {
  room: string;
  id: string;
  data: Buffer;
}

interface Row {
  room: string;
  id: string;
  file: number | null;
  data: Buffer;
}

/** Where store.db keeps chunk file `n`. */
export function chunkFilePath(storePath: string, n: number): string {
  return join(dirname(storePath), 'chunks', String(Math.floor(n / 1000)), String(n));
}

function rows(storePath: string, room?: string): Row[] {
  const db = new Database(storePath, { readonly: true });
  try {
    const select = 'SELECT room, id, file, data FROM chunks';
    return room === undefined
      ? db.prepare<[], Row>(select).all()
      : db.prepare<[string], Row>(`${select} WHERE room = ?`).all(room);
  } finally {
    db.close();
  }
}

/** The chunks store.db holds (of `room`, when given), with their bytes, read from the host's disk. */
export function storedChunks(storePath: string, room?: string): StoredChunk[] {
  return rows(storePath, room).map((row) => ({
    room: row.room,
    id: row.id,
    data: row.file === null ? row.data : readFileSync(chunkFilePath(storePath, row.file)),
  }));
}

/** Replaces the bytes of chunk `id` on the host's disk (as disk rot would), where they are kept. */
export function overwriteStoredChunk(storePath: string, id: string, data: Buffer): void {
  for (const row of rows(storePath).filter((r) => r.id === id)) {
    if (row.file !== null) {
      writeFileSync(chunkFilePath(storePath, row.file), data);
      continue;
    }
    const db = new Database(storePath);
    try {
      db.prepare('UPDATE chunks SET data = ? WHERE room = ? AND id = ?').run(data, row.room, id);
    } finally {
      db.close();
    }
  }
}
