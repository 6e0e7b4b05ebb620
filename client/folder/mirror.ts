import * as Y from 'yjs';
import type { BlobQueue } from './blob-queue.ts';
import { type Disk, type FileMeta, mtimeOf, type Stamp, sameStamp, withinAny } from './disk.ts';
import { digestOf } from './document.ts';
import type { EntryIndex } from './entry-index.ts';
import type { DiskRecord } from './state-log.ts';
import { KeptLocal, SyncIgnore, syncIgnoreName } from './syncignore.ts';
import { editText } from './text-merge.ts';
import { dropTwins } from './text-twins.ts';

/** Lines about bad entries from other devices, at most (a device could send millions). */
const maxBadEntryLines = 50;

/** One call per line to print; `problem` lines go to stderr. */
export type FolderLog = (line: { kind: 'out' | 'problem'; line: string }) => void;

/**
 * What the folder sync knows of the folder on disk, shared by the reader (scan.ts) and
 * the writer (write.ts): which entry each file is with the digest of the content it had
 * when last read or written (kept in the state log), the stamp of each file when last read, the
 * files here that do not sync, and the paths to look at again at the next settle.
 */
export class FolderMirror {
  /** Each file's stamp when last read or written here. */
  readonly #stamps = new Map<string, Stamp>();
  /** Files here that do not sync (binary, too large, unreadable): never overwritten nor deleted. */
  readonly #skipped = new Set<string>();
  /** Paths whose write waited (held back, blocked, failed): looked at again at the next settle. */
  readonly #retry = new Set<string>();
  /** Paths to read at the next scan, also a partial one (a file moved aside, one left in place). */
  readonly #readAgain = new Set<string>();
  /** Names the walks passed over (a name that does not sync, a link, a special file). */
  readonly #skippedNames = new Set<string>();
  /**
   * For a text file whose document moved on from what the file holds (other devices' edits not
   * written here yet): the content the file last had in step, the base that an edit made here
   * meanwhile is merged from (three ways: base, the file, the document).
   */
  readonly bases: Map<string, string>;
  /** Text files edited here while a write over them was due: read and merged, then written. */
  readonly #mergeDue = new Set<string>();
  /** Changes of `bases` not in the state log yet (null: dropped). */
  private basesChanged = new Map<string, string | null>();
  /** The folder's `.syncignore` rules as last read. */
  rules = new SyncIgnore(undefined);
  /** What moves the files kept as chunks; without it they are neither sent nor written. */
  blobs: BlobQueue | undefined;
  /** Files larger than this are not synced (skipped with a line). */
  maxFileBytes = 1_073_741_824;
  /** Whether permission bits sync (`--no-perms`: neither read nor written here). */
  perms = true;
  /** How a text changed here becomes edits of its entry (the benchmark swaps in another). */
  editText: (text: Y.Text, content: string) => void = editText;
  /** How many lines about bad entries were printed. */
  reportedBadEntries = 0;
  /**
   * On a first `sync` with the host's history at hand: every text each entry had there, by id
   * (ancestors.ts), for the files found here that another device has at the same path.
   */
  ancestors: ((ids: string[]) => Map<string, string[]>) | undefined;
  private readonly pathsOfId = new Map<string, Set<string>>();
  /** The folder's own path (the disk's root). */
  get dir(): string {
    return this.disk.root;
  }

  private readonly reported = new Set<string>();
  /** Paths found here that the rules kept here (see `KeptLocal`). */
  keptLocal = new KeptLocal();

  constructor(
    readonly disk: Disk,
    readonly device: string,
    readonly doc: Y.Doc,
    readonly files: Y.Map<unknown>,
    readonly index: EntryIndex,
    readonly onDisk: Map<string, DiskRecord>,
    private readonly log: FolderLog,
    readonly now: () => number,
    bases: Map<string, string> = new Map(),
  ) {
    for (const [path, record] of onDisk) this.link(record.id, path);
    this.bases = bases;
  }

  /** What an entry keeps of a file read here: its time, and its mode unless `--no-perms`. */
  metaOf(stamp: Stamp): FileMeta {
    return this.perms ? { mtime: mtimeOf(stamp), mode: stamp.mode } : { mtime: mtimeOf(stamp) };
  }

  /**
   * The time and mode to give a file written here for an entry with `meta`: the entry's; a mode
   * the entry lacks (or any, with `--no-perms`) is the one of the file it replaces, if any.
   */
  writeMeta(meta: FileMeta, here: Stamp | undefined): FileMeta {
    const mode = this.perms && meta.mode !== undefined ? meta.mode : here?.mode;
    return { mtime: meta.mtime, mode };
  }

  /** Whether the file at `path`, as last read or written here, lacks the entry's time or mode. */
  metaDiffers(path: string, meta: FileMeta): boolean {
    const stamp = this.#stamps.get(path);
    if (stamp === undefined) return false;
    if (meta.mtime !== undefined && mtimeOf(stamp) !== meta.mtime) return true;
    return this.perms && meta.mode !== undefined && stamp.mode !== meta.mode;
  }

  /** The stamp `path` had when last read or written here. */
  stampOf(path: string): Stamp | undefined {
    return this.#stamps.get(path);
  }

  setStamp(path: string, stamp: Stamp): void {
    this.#stamps.set(path, stamp);
  }

  forgetStamp(path: string): void {
    this.#stamps.delete(path);
  }

  /** A file here that does not sync (or, `false`, one that does again). */
  skipHere(path: string, skipped = true): void {
    if (skipped) this.#skipped.add(path);
    else this.#skipped.delete(path);
  }

  isSkippedHere(path: string): boolean {
    return this.#skipped.has(path);
  }

  /** The files here that do not sync (a copy). */
  skippedHere(): string[] {
    return [...this.#skipped];
  }

  /**
   * The names a walk of `scopes` passed over: those it found now, none of the others under
   * those scopes (gone, or syncing now).
   */
  noteSkippedNames(scopes: string[], found: Iterable<string>): void {
    const inScope = withinAny(scopes);
    for (const path of [...this.#skippedNames]) {
      if (inScope(path)) this.#skippedNames.delete(path);
    }
    for (const path of found) this.#skippedNames.add(path);
  }

  /** How many names here do not sync: files read and skipped, and names the walks passed over. */
  get skippedCount(): number {
    return this.#skipped.size + this.#skippedNames.size;
  }

  /** `path` is written (or removed) at the next settle. */
  retryLater(path: string): void {
    this.#retry.add(path);
  }

  /** The paths due at this settle; none are due after. */
  takeRetries(): Set<string> {
    const due = new Set(this.#retry);
    this.#retry.clear();
    return due;
  }

  /** The paths waiting for a write (a copy). */
  retries(): string[] {
    return [...this.#retry];
  }

  /** `path` is read at the next scan, also a partial one. */
  readLater(path: string): void {
    this.#readAgain.add(path);
  }

  takeReadAgain(): string[] {
    const due = [...this.#readAgain];
    this.#readAgain.clear();
    return due;
  }

  /** A text at `path` was edited here while a write over it was due: merged at this settle. */
  mergeLater(path: string): void {
    this.#mergeDue.add(path);
  }

  takeMergeDue(): string[] {
    const due = [...this.#mergeDue];
    this.#mergeDue.clear();
    return due;
  }

  /** Sets (or with null drops) the base of the text file at `path`. */
  setBase(path: string, base: string | null): void {
    if (base === null && !this.bases.has(path)) return;
    if (base === null) this.bases.delete(path);
    else this.bases.set(path, base);
    this.basesChanged.set(path, base);
  }

  /**
   * For a transaction from elsewhere, as it applies (`events` on the folder's `files` map):
   * each text it changed whose file was in step with it (the file's recorded digest is that of
   * the text before) keeps the text before as its base, unless it has one; the ids of the
   * entries it changed inside. The text before is read from the items the transaction
   * neither added nor found deleted (the deleted ones keep their content until it ends). An
   * entry whose text did not change needs no base: its text is still what the file had.
   */
  keepBasesOf(events: Y.YEvent<Y.AbstractType<unknown>>[]): Set<string> {
    const touched = new Set<string>();
    const textEvents = new Map<string, Y.YEvent<Y.AbstractType<unknown>>>();
    for (const event of events) {
      // An entry added or replaced whole is new to this device: no file of it to merge with
      // (the index names it for the writer).
      if (event.target === this.files) continue;
      const [id, key] = event.path;
      if (typeof id !== 'string') continue;
      touched.add(id);
      if (key === 'text' && event.path.length === 2 && event.target instanceof Y.Text) {
        textEvents.set(id, event);
      }
    }
    for (const id of touched) {
      for (const path of this.diskPathsOf(id)) {
        const record = this.onDisk.get(path);
        if (record?.id !== id || this.bases.has(path)) continue;
        const event = textEvents.get(id);
        if (event === undefined) continue;
        const before = textBefore(event);
        if (digestOf(before) === record.digest) this.setBase(path, before);
      }
    }
    return touched;
  }

  /**
   * The text files of the entries `ids` that changed on disk since they were last read (to be
   * read, and merged, before they are written).
   */
  changedSinceRead(ids: Iterable<string>): string[] {
    const paths: string[] = [];
    for (const id of ids) {
      for (const path of this.diskPathsOf(id)) {
        const record = this.onDisk.get(path);
        const entry = this.index.get(id);
        if (record?.id !== id || typeof entry !== 'object' || entry.text === undefined) continue;
        const stamp = this.disk.statFile(path);
        if (stamp === undefined || 'problem' in stamp || !sameStamp(stamp, this.#stamps.get(path)))
          paths.push(path);
      }
    }
    return paths;
  }

  /** The same insert made here and on another device at once, kept once (text-twins.ts). */
  dropTwins(ids: string[]): void {
    for (const id of ids) {
      const entry = this.index.get(id);
      if (typeof entry === 'object' && entry.text !== undefined) dropTwins(entry.text);
    }
  }

  /** The changes of the bases since the last call, for the state log. */
  takeBaseChanges(): Map<string, string | null> {
    const changed = this.basesChanged;
    this.basesChanged = new Map();
    return changed;
  }

  /**
   * Reads `.syncignore` again; when its rules changed, every entry is looked at again (one the
   * rules now let through is written) and true is returned: the caller reads the whole folder,
   * for the files they now let through.
   */
  refreshRules(): boolean {
    const read = this.disk.readText(syncIgnoreName);
    const text = read !== undefined && 'text' in read ? read.text : undefined;
    if (text === this.rules.text) return false;
    this.rules = new SyncIgnore(text);
    const { problem } = this.rules;
    if (problem !== undefined) {
      this.say('problem', `${syncIgnoreName}: ${problem}; only dot files are left out`);
    }
    for (const path of this.index.paths()) this.#retry.add(path);
    return true;
  }

  /** Applies changes of the disk records. */
  setRecords(changes: Map<string, DiskRecord | null>): void {
    for (const [path, record] of changes) {
      const before = this.onDisk.get(path);
      if (before !== undefined) this.pathsOfId.get(before.id)?.delete(path);
      if (record === null) {
        this.onDisk.delete(path);
        this.setBase(path, null);
      } else {
        this.onDisk.set(path, record);
        this.link(record.id, path);
      }
    }
  }

  /**
   * A file kept as chunks read again unchanged: its new stamp, also in its disk record when
   * `record` (the changed record, for the state log).
   */
  restamp(path: string, stamp: Stamp, record: boolean): Map<string, DiskRecord> {
    this.#stamps.set(path, stamp);
    const before = this.onDisk.get(path);
    if (before === undefined || !record) return new Map();
    const changes = new Map([[path, { ...before, stamp }]]);
    this.setRecords(changes);
    return changes;
  }

  /**
   * Texts edited here while a batch was being written (a process killed in between): their
   * records go back to the digests of their bases (`digests` by path), so that the next read
   * merges them three ways.
   */
  backToBase(digests: Map<string, string>): void {
    for (const [path, digest] of digests) {
      const record = this.onDisk.get(path);
      if (record !== undefined) this.setRecords(new Map([[path, { ...record, digest }]]));
    }
  }

  /** The paths where the entry `id` is on disk. */
  diskPathsOf(id: string): Iterable<string> {
    return this.pathsOfId.get(id) ?? [];
  }

  private link(id: string, path: string): void {
    const paths = this.pathsOfId.get(id);
    if (paths === undefined) this.pathsOfId.set(id, new Set([path]));
    else paths.add(path);
  }

  /**
   * Whether `path` stays on this device: never read, sent, written nor deleted here. The rules
   * keep it, or it is a file of this device's that it kept here before rules from another device
   * let it through (never written over).
   */
  ignores(path: string, isFolder = false): boolean {
    if (this.rules.ignores(path, isFolder)) return true;
    return !this.onDisk.has(path) && this.keptLocal.covers(path) && this.exists(path);
  }

  /**
   * The walk's test of a path found on disk: one the rules keep here is remembered as kept
   * local; a file kept local that the rules now let through stays (said once) unless the sync
   * wrote or read it since (it has a record). A folder is walked: files another device sent
   * into a folder kept here are read as any others.
   */
  skipsFound(path: string, isFolder: boolean): boolean {
    if (this.rules.ignores(path, isFolder)) {
      this.keptLocal.add(path, isFolder);
      return true;
    }
    if (isFolder || this.onDisk.has(path) || !this.keptLocal.covers(path)) return false;
    this.sayOnce(
      `kept ${path}`,
      `${path} stays on this device: it was kept here before rules from another device let it through (edit ${syncIgnoreName} on this device to send it)`,
    );
    return true;
  }

  private exists(path: string): boolean {
    try {
      this.disk.fs.lstat(`${this.disk.root}/${path}`);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Lets go of kept-local paths gone from disk that the rules still keep, and, when `edited`
   * (the rules were edited on this device), of those the rules let through: resolves with
   * those, to be read now.
   */
  settleKeptLocal(edited: boolean): string[] {
    const freed = this.keptLocal.settle(this.rules, (path) => this.exists(path), edited);
    for (const path of freed) this.unsay(`kept ${path}`);
    return freed;
  }

  say(kind: 'out' | 'problem', line: string): void {
    this.log({ kind, line });
  }

  /** A problem line once per key (a path and a reason) until `unsay`; whether it was said now. */
  sayOnce(key: string, line: string): boolean {
    if (this.reported.has(key)) return false;
    this.reported.add(key);
    this.say('problem', line);
    return true;
  }

  unsay(key: string): void {
    this.reported.delete(key);
  }

  /** One line per entry another device sent that cannot be used (it is never written). */
  reportBadEntry(id: string, problem: string): void {
    if (this.reportedBadEntries >= maxBadEntryLines) {
      this.sayOnce(
        'bad entries',
        `more entries from other devices cannot be used; not listed (the first ${maxBadEntryLines} were)`,
      );
      return;
    }
    const value = this.files.get(id);
    const path = value instanceof Y.Map ? value.get('path') : undefined;
    const name =
      typeof path === 'string'
        ? `"${path.length > 120 ? `${path.slice(0, 120)}…` : path}"`
        : 'an entry';
    if (
      this.sayOnce(`entry ${id}`, `skipped ${name} from another device (entry ${id}): ${problem}`)
    ) {
      this.reportedBadEntries += 1;
    }
  }
}

/** What the text of `event` held before its transaction (see `keepBasesOf`). */
function textBefore(event: Y.YEvent<Y.AbstractType<unknown>>): string {
  let text = '';
  for (let item = event.target._start; item !== null; item = item.right) {
    if (event.adds(item) || (item.deleted && !event.deletes(item))) continue;
    if (item.content instanceof Y.ContentString) text += item.content.str;
  }
  return text;
}
