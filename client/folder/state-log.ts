import { dirname } from 'node:path';
import * as Y from 'yjs';
import { fromBase64, toBase64 } from '../base64.ts';
import type { StoreProgress } from '../yjs-store-cursor.ts';
import type { Stamp } from './disk.ts';
import { codeOf, type FileSystem, nodeFileSystem, writeAll } from './file-system.ts';

/**
 * What the folder sync keeps between runs, in one append-only file of JSON lines beside the
 * credentials: the folder document as it is on disk (Yjs updates), which entry each file on disk
 * is (`p`: path → entry id and content digest), the disk changes about to be made (`w`), and for
 * a text file whose document moved on before the file was written, the content it last had in
 * step (`b`: the base an edit made here meanwhile merges from; null when dropped), and the
 * paths found here that the rules kept here (`k`).
 *
 * A change from another device is recorded before the files change (the new document state,
 * the new disk records and the list of replacements, with the temporary files already written),
 * then the files are put in place, then `{"d":1}` says it is done. A process killed in between
 * finishes the list at its next start: a file still as it was is replaced, one that the user
 * changed meanwhile is kept as a conflict copy. So the document and the folder never disagree
 * after a crash, and an edit written to disk is never taken for a new local edit (which would
 * send it again, doubled). A torn last line is ignored.
 */

/** Which entry a file on disk is, and the digest of the content it had when last read or written. */
export interface DiskRecord {
  id: string;
  digest: string;
  /**
   * For a file kept as chunks, its stamp when last read or written: a restart does not read a
   * file whose stamp is unchanged again (hashing a folder of large files at every start).
   */
  stamp?: Stamp;
}

/** One disk change of a recorded batch. */
export type PendingOp =
  | { op: 'write'; path: string; temp: string; before: string | null; after: string }
  | { op: 'remove'; path: string; before: string };

interface LogLine {
  u?: string;
  /** The folder document's place on the host, when the document holds all it stands for. */
  s?: StoreProgress;
  p?: Record<string, DiskRecord | null>;
  b?: Record<string, string | null>;
  w?: PendingOp[];
  d?: 1;
  /** The folder's id, also in its marker file (a marker made anew by hand has another, or none). */
  f?: string;
  /** The paths found here that the rules kept here, all of them (see `KeptLocal`). */
  k?: string[];
}

/** Past this size the log is rewritten as one line, when also 4× what that line would take. */
const compactAfterBytes = 4_194_304;

export class FolderState {
  private bytes = 0;
  private compactBytes = 0;
  private fd: number | undefined;
  /** The last place on the host recorded (kept by `compact`). */
  private store: StoreProgress | undefined;
  /** The folder's id (see `LogLine.f`); undefined in a log written before folders had one. */
  folderId: string | undefined;
  /** The paths kept here (see `LogLine.k`), as last recorded. */
  keptLocal: string[] = [];

  private constructor(
    readonly file: string,
    private readonly fs: FileSystem,
  ) {}

  /**
   * Reads the log into `doc`: resolves with the disk records, the bases and the batch that was
   * not finished (empty when none).
   */
  static open(file: string, doc: Y.Doc, origin: unknown, fs: FileSystem = nodeFileSystem) {
    fs.mkdir(dirname(file), { recursive: true, mode: 0o700 });
    const state = new FolderState(file, fs);
    const onDisk = new Map<string, DiskRecord>();
    const bases = new Map<string, string>();
    let pending: PendingOp[] = [];
    let text = '';
    try {
      text = Buffer.from(fs.readFile(file)).toString('utf8');
    } catch (err: unknown) {
      if (codeOf(err) !== 'ENOENT') throw err;
    }
    const updates: Uint8Array[] = [];
    for (const line of text.split('\n')) {
      if (line === '') continue;
      let entry: LogLine;
      try {
        entry = JSON.parse(line) as LogLine;
      } catch {
        break; // a line torn by a crash: nothing after it was written
      }
      const update = entry.u === undefined ? undefined : fromBase64(entry.u);
      if (update !== undefined) updates.push(update);
      for (const [path, record] of Object.entries(entry.p ?? {})) {
        if (record === null) onDisk.delete(path);
        else onDisk.set(path, record);
      }
      for (const [path, base] of Object.entries(entry.b ?? {})) {
        if (typeof base === 'string') bases.set(path, base);
        else bases.delete(path);
      }
      if (entry.s !== undefined) state.store = entry.s;
      if (entry.f !== undefined) state.folderId = entry.f;
      if (entry.k !== undefined) state.keptLocal = entry.k;
      if (entry.w !== undefined) pending = entry.w;
      if (entry.d === 1) pending = [];
    }
    if (updates.length > 0) Y.applyUpdate(doc, Y.mergeUpdates(updates), origin);
    state.bytes = text.length;
    return { state, onDisk, bases, pending, store: state.store };
  }

  /** Appends one record; the disk changes it lists are to be made after this returns. */
  append(record: {
    update?: Uint8Array;
    disk?: Map<string, DiskRecord | null>;
    bases?: Map<string, string | null>;
    pending?: PendingOp[];
    done?: boolean;
    store?: StoreProgress;
    keptLocal?: string[];
  }): void {
    const line: LogLine = {};
    if (record.keptLocal !== undefined) {
      line.k = record.keptLocal;
      this.keptLocal = record.keptLocal;
    }
    if (record.update !== undefined) line.u = toBase64(record.update);
    if (record.store !== undefined) {
      line.s = record.store;
      this.store = record.store;
    }
    if (record.disk !== undefined && record.disk.size > 0) line.p = Object.fromEntries(record.disk);
    if (record.bases !== undefined && record.bases.size > 0)
      line.b = Object.fromEntries(record.bases);
    if (record.pending !== undefined && record.pending.length > 0) line.w = record.pending;
    if (record.done === true) line.d = 1;
    if (Object.keys(line).length === 0) return;
    // On disk before the files change and before the document's update leaves this device: a
    // power cut cannot leave a written file or a sent edit that the log does not know.
    this.writeLine(line, line.u !== undefined || line.w !== undefined);
  }

  private writeLine(line: LogLine, durable: boolean): void {
    const json = `${JSON.stringify(line)}\n`;
    this.fd ??= this.fs.open(this.file, 'append', 0o600);
    writeAll(this.fs, this.fd, Buffer.from(json));
    if (durable) this.fs.sync(this.fd, true);
    this.bytes += json.length;
  }

  /** Records the folder's id. */
  setFolderId(id: string): void {
    this.folderId = id;
    this.writeLine({ f: id }, false);
  }

  /** Closes the log file (the next append opens it again). */
  close(): void {
    if (this.fd !== undefined) this.fs.close(this.fd);
    this.fd = undefined;
  }

  /** Whether the log has grown enough to be rewritten. */
  get wantsCompaction(): boolean {
    return this.bytes > compactAfterBytes && this.bytes > 4 * this.compactBytes;
  }

  /** Rewrites the log as one line: the whole document, the disk records and the bases. */
  compact(doc: Y.Doc, onDisk: Map<string, DiskRecord>, bases: Map<string, string>): void {
    const json = `${JSON.stringify({
      u: toBase64(Y.encodeStateAsUpdate(doc)),
      ...(this.store === undefined ? {} : { s: this.store }),
      ...(this.folderId === undefined ? {} : { f: this.folderId }),
      ...(this.keptLocal.length === 0 ? {} : { k: this.keptLocal }),
      p: Object.fromEntries(onDisk),
      ...(bases.size === 0 ? {} : { b: Object.fromEntries(bases) }),
    } satisfies LogLine)}\n`;
    this.close();
    const temp = `${this.file}.tmp`;
    const fd = this.fs.open(temp, 'replace', 0o600);
    try {
      writeAll(this.fs, fd, Buffer.from(json));
      this.fs.sync(fd, false);
    } finally {
      this.fs.close(fd);
    }
    this.fs.rename(temp, this.file);
    this.bytes = this.fs.lstat(this.file).size;
    this.compactBytes = this.bytes;
  }
}
