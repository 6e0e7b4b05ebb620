import * as Y from 'yjs';
import {
  addEntry,
  applyClashFixes,
  clashFixes,
  digestOf,
  EntryIndex,
  type FileEntry,
} from './folder-doc.ts';
import {
  commitTemp,
  moveAside,
  readText,
  removeFile,
  removeQuietly,
  type Stamp,
  sameStamp,
  statFile,
  walkFolder,
  writeTemp,
} from './folder-fs.ts';
import { conflictName } from './folder-names.ts';
import { type DiskRecord, FolderState, type PendingOp } from './folder-state.ts';
import { ReceiveBudget, type ReceiveLimits } from './receive-budget.ts';
import { replaceText } from './text-diff.ts';

/** Origins of the disk document's transactions. */
const localOrigin = 'folder';
const remoteOrigin = 'remote';
const stateOrigin = 'state';
/** Quiet time after a change from another device before it is written (a burst is one batch). */
const remoteSettleMs = 20;
/** How often files held back by the receive limits are tried again. */
const heldRetryMs = 5_000;

export type FolderLine = { kind: 'out' | 'problem'; line: string };

export interface FolderSyncOptions {
  /** The folder (its real path). */
  dir: string;
  /** The state log of this folder and project. */
  stateFile: string;
  /** This device's id: new entries and conflict copies are named by it. */
  device: string;
  /** One call per line to print; names in it are already escaped by the caller's printer. */
  log: (line: FolderLine) => void;
  limits?: ReceiveLimits;
  now?: () => number;
  /** Called after a batch of disk changes is recorded and before the files change (tests stop there). */
  onRecorded?: () => void;
}

/**
 * Keeps a folder of text files and the folder document in step. Two Y.Docs: `shared`, which the
 * provider syncs with the other devices, and the disk document, which is exactly what the folder
 * holds (plus entries not written here: bad names, held back, blocked by a link). Changes read
 * from the folder are made on the disk document (as edits from its own previous text, so they
 * merge exactly) and copied to `shared`; changes from other devices collect in `shared` and are
 * applied to the disk document in batches, after the folder was read once more, then written.
 * See folder-doc.ts for the document and folder-state.ts for what survives a crash.
 */
export class FolderSync {
  readonly shared = new Y.Doc();
  private readonly disk = new Y.Doc();
  private readonly files = this.disk.getMap<unknown>('files');
  private readonly index = new EntryIndex(this.files);
  private readonly state: FolderState;
  private readonly onDisk: Map<string, DiskRecord>;
  private readonly stamps = new Map<string, Stamp>();
  /** Files here that do not sync (binary, too large, unreadable): never overwritten nor deleted. */
  private readonly skippedHere = new Set<string>();
  private readonly reported = new Set<string>();
  private readonly budget: ReceiveBudget;
  private readonly now: () => number;
  private unsaved: Uint8Array[] = [];
  private remote: Uint8Array[] = [];
  private remoteTimer: ReturnType<typeof setTimeout> | undefined;
  private heldTimer: ReturnType<typeof setTimeout> | undefined;
  private holding = false;
  private closed = false;

  constructor(private readonly options: FolderSyncOptions) {
    this.now = options.now ?? Date.now;
    this.budget = new ReceiveBudget(options.limits, this.now);
    this.files.observeDeep((events) => this.index.forgetChanged(events));
    this.disk.on('update', (update: Uint8Array, origin: unknown) => {
      this.unsaved.push(update);
      if (origin !== remoteOrigin) Y.applyUpdate(this.shared, update, localOrigin);
    });
    this.shared.on('update', (update: Uint8Array, origin: unknown) => {
      if (origin === localOrigin || this.closed) return;
      this.remote.push(update);
      clearTimeout(this.remoteTimer);
      this.remoteTimer = setTimeout(() => this.guarded(() => this.applyRemote()), remoteSettleMs);
    });
    const opened = FolderState.open(options.stateFile, this.disk, stateOrigin);
    this.state = opened.state;
    this.onDisk = opened.onDisk;
    this.unsaved = [];
    this.finishPending(opened.pending);
    this.state.compact(this.disk, this.onDisk);
  }

  /** Reads the folder and sends what changed since the last agreement; then writes what is due. */
  scan(): void {
    if (this.closed) return;
    this.readFolder();
    this.settle();
  }

  /** Every change of other devices received so far, applied to the folder now. */
  flushRemote(): void {
    clearTimeout(this.remoteTimer);
    this.applyRemote();
  }

  /** Stops the timers and writes the state one last time. */
  close(): void {
    if (this.closed) return;
    this.guarded(() => this.flushRemote());
    this.closed = true;
    clearTimeout(this.remoteTimer);
    clearTimeout(this.heldTimer);
    this.persist({});
    this.state.compact(this.disk, this.onDisk);
  }

  /** Stops the timers and writes nothing more: what a process killed now leaves behind. */
  halt(): void {
    this.closed = true;
    clearTimeout(this.remoteTimer);
    clearTimeout(this.heldTimer);
  }

  /** Entries (live, usable) by path as the folder should have them; for status and tests. */
  layout(): Map<string, string> {
    const paths = new Map<string, string>();
    for (const [path, entries] of this.index.livePaths()) {
      paths.set(path, newest(entries).text.toString());
    }
    return paths;
  }

  /** Runs `work`; a failure is one line, never the end of the process. */
  guarded(work: () => void): void {
    try {
      work();
    } catch (err: unknown) {
      this.options.log({
        kind: 'problem',
        line: `problem: ${err instanceof Error ? err.message : String(err)}; trying again at the next scan`,
      });
    }
  }

  private applyRemote(): void {
    const updates = this.remote.splice(0);
    if (updates.length === 0 || this.closed) return;
    this.readFolder(); // an edit made here first: it merges from the text it was made on
    Y.applyUpdate(this.disk, Y.mergeUpdates(updates), remoteOrigin);
    this.settle();
  }

  private say(kind: FolderLine['kind'], line: string): void {
    this.options.log({ kind, line });
  }

  /** A problem line once per path and reason. */
  private sayOnce(key: string, line: string): void {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.say('problem', line);
  }

  private persist(record: {
    disk?: Map<string, DiskRecord | null>;
    pending?: PendingOp[];
    done?: boolean;
  }) {
    const update = this.unsaved.length === 0 ? undefined : Y.mergeUpdates(this.unsaved.splice(0));
    this.state.append({ ...record, update });
  }

  private setRecords(changes: Map<string, DiskRecord | null>): void {
    for (const [path, record] of changes) {
      if (record === null) this.onDisk.delete(path);
      else this.onDisk.set(path, record);
    }
  }

  /** Reads the folder and turns what changed since the last agreement into document edits. */
  private readFolder(): void {
    const walk = walkFolder(this.options.dir);
    for (const temp of walk.temps) removeQuietly(this.options.dir, temp);
    for (const [path, why] of walk.skipped)
      this.sayOnce(`skip ${path} ${why}`, `skipped ${path}: ${why}`);
    for (const folder of walk.unreadable) {
      const name = folder === '' ? this.options.dir : folder;
      this.sayOnce(`unreadable ${folder}`, `cannot read ${name}: nothing in it counts as deleted`);
    }
    const changes = new Map<string, DiskRecord | null>();
    const added: { path: string; text: string; digest: string }[] = [];
    const now = this.now();
    this.disk.transact(() => {
      for (const [path, stamp] of walk.files) {
        const record = this.onDisk.get(path);
        if (record !== undefined && sameStamp(this.stamps.get(path), stamp)) continue;
        const read = readText(this.options.dir, path);
        if (read === undefined) continue;
        if ('problem' in read) {
          this.skippedHere.add(path);
          this.sayOnce(`skip ${path} ${read.problem}`, `skipped ${path}: ${read.problem}`);
          continue;
        }
        this.skippedHere.delete(path);
        this.stamps.set(path, read.stamp);
        const digest = digestOf(read.text);
        if (record === undefined) added.push({ path, text: read.text, digest });
        else if (digest !== record.digest)
          this.editHere(path, record, read.text, digest, changes, now);
      }
      const missing = new Map<string, DiskRecord>();
      for (const [path, record] of this.onDisk) {
        if (walk.files.has(path) || this.skippedHere.has(path)) continue;
        if (walk.unreadable.some((folder) => folder === '' || path.startsWith(`${folder}/`)))
          continue;
        missing.set(path, record);
      }
      for (const file of added) {
        const from = [...missing].find(([, record]) => record.digest === file.digest)?.[0];
        const entry = from === undefined ? undefined : this.entryAt(from, missing.get(from)!);
        if (from !== undefined && entry !== undefined) {
          missing.delete(from);
          entry.map.set('path', file.path);
          changes.set(from, null);
          changes.set(file.path, { id: entry.id, digest: file.digest });
          this.say('out', `sent ${from} → ${file.path} (renamed)`);
          continue;
        }
        const id = addEntry(this.files, {
          path: file.path,
          content: file.text,
          device: this.options.device,
          time: now,
        });
        changes.set(file.path, { id, digest: file.digest });
        this.say('out', `sent ${file.path} (new)`);
      }
      for (const [path, record] of missing) {
        const entry = this.entryAt(path, record);
        // A document that moved on since this file was last written keeps its newer version:
        // the delete was of an older one, and the newer comes back at the next write.
        if (entry !== undefined) {
          entry.map.set('deleted', record.digest);
          this.say('out', `sent ${path} (deleted)`);
        }
        changes.set(path, null);
        this.stamps.delete(path);
      }
    }, localOrigin);
    this.setRecords(changes);
    if (changes.size > 0 || this.unsaved.length > 0) this.persist({ disk: changes });
  }

  /** The live entry that the file at `path` is, still with the content on disk; else undefined. */
  private entryAt(path: string, record: DiskRecord): FileEntry | undefined {
    const entry = this.index.get(record.id);
    if (typeof entry !== 'object' || entry.path !== path || !this.index.isLive(record.id))
      return undefined;
    return this.index.digest(record.id) === record.digest ? entry : undefined;
  }

  /** An edit on disk of a file the document has: the change from its last version, exactly. */
  private editHere(
    path: string,
    record: DiskRecord,
    text: string,
    digest: string,
    changes: Map<string, DiskRecord | null>,
    now: number,
  ): void {
    const entry = this.entryAt(path, record);
    if (entry !== undefined) {
      replaceText(entry.text, text);
      changes.set(path, { id: entry.id, digest });
      this.say('out', `sent ${path}`);
      return;
    }
    // The document has moved on from what this file was built on (a write here failed): this
    // version is kept whole as a conflict copy, and the document's goes in its place.
    const to = conflictName(path, now, this.options.device);
    addEntry(this.files, { path: to, content: text, device: this.options.device, time: now });
    this.say('out', `sent ${to} (conflict copy of ${path}: edited here from an older version)`);
  }

  /** Settles clashes, then makes the folder what the document says. */
  private settle(): void {
    for (let round = 0; round < 4; round += 1) {
      const fixes = clashFixes(this.index, this.index.livePaths());
      if (fixes.length === 0) break;
      this.disk.transact(() => applyClashFixes(this.index, fixes), localOrigin);
      for (const fix of fixes) {
        if (fix.kind === 'merge') continue;
        this.say(
          'out',
          `conflict: ${fix.entry.path} from device ${fix.entry.device} kept as ${fix.to}`,
        );
      }
    }
    // A write under a folder that a file of this batch was still in the way of goes next.
    for (let round = 0; round < 3 && this.reconcile(); round += 1);
    this.reportBadEntries();
    if (this.state.wantsCompaction) this.state.compact(this.disk, this.onDisk);
  }

  /**
   * One line per entry another device sent that cannot be used (it is never written), unless
   * reconcile already said it left a file here because of it (the same key).
   */
  private reportBadEntries(): void {
    for (const [id, problem] of this.index.problems()) {
      const value = this.files.get(id);
      const path = value instanceof Y.Map ? value.get('path') : undefined;
      const name =
        typeof path === 'string'
          ? `"${path.length > 120 ? `${path.slice(0, 120)}…` : path}"`
          : 'an entry';
      this.sayOnce(`bad ${id}`, `skipped ${name} from another device (entry ${id}): ${problem}`);
    }
  }

  /**
   * Plans, records, then makes the disk changes that bring the folder to the document; true when
   * a file was removed and a write was blocked by a file in the way (worth another round).
   */
  private reconcile(): boolean {
    const layout = new Map<string, FileEntry>();
    for (const [path, entries] of this.index.livePaths()) layout.set(path, newest(entries));
    const plan: { op: PendingOp; content?: string; entry?: FileEntry }[] = [];
    const changes = new Map<string, DiskRecord | null>();
    for (const [path, record] of this.onDisk) {
      if (layout.has(path)) continue;
      const entry = this.index.get(record.id);
      if (typeof entry === 'string') {
        this.sayOnce(
          `bad ${record.id}`,
          `left ${path} as it is: another device sent a bad entry for it (${entry})`,
        );
        continue;
      }
      plan.push({ op: { op: 'remove', path, before: record.digest } });
      changes.set(path, null);
    }
    let held = 0;
    let blocked = false;
    for (const [path, entry] of layout) {
      const record = this.onDisk.get(path);
      const digest = this.index.digest(entry.id)!;
      if (record !== undefined && record.id === entry.id && record.digest === digest) continue;
      if (this.skippedHere.has(path)) {
        this.sayOnce(
          `here ${path}`,
          `not written ${path}: a file here that does not sync has that name`,
        );
        continue;
      }
      const content = entry.text.toString();
      if (record === undefined && !this.budget.take(Buffer.byteLength(content))) {
        held += 1;
        continue;
      }
      const temp = writeTemp(this.options.dir, path, content);
      if ('problem' in temp) {
        const removing = plan.some(
          ({ op }) => op.op === 'remove' && path.startsWith(`${op.path}/`),
        );
        if (removing) blocked = true;
        else this.sayOnce(`write ${path} ${temp.problem}`, `not written ${path}: ${temp.problem}`);
        continue;
      }
      const before = record?.digest ?? null;
      plan.push({ op: { op: 'write', path, temp: temp.temp, before, after: digest }, entry });
      changes.set(path, { id: entry.id, digest });
    }
    this.hold(held);
    if (plan.length === 0) {
      if (this.unsaved.length > 0) this.persist({});
      return false;
    }
    this.persist({ disk: changes, pending: plan.map((step) => step.op) });
    this.options.onRecorded?.();
    const corrections = new Map<string, DiskRecord | null>();
    for (const { op } of plan) {
      const previous = this.onDisk.get(op.path) ?? null;
      const problem = op.op === 'write' ? this.commitWrite(op) : this.commitRemove(op);
      if (problem !== undefined) {
        this.sayOnce(`commit ${op.path} ${problem}`, `not written ${op.path}: ${problem}`);
        corrections.set(op.path, previous);
      }
    }
    this.setRecords(changes);
    this.setRecords(corrections);
    this.persist({ disk: corrections, done: true });
    return blocked;
  }

  /** Whether the file at `path` is still what this process last read or wrote there. */
  private unchangedHere(path: string): boolean {
    const stamp = statFile(this.options.dir, path);
    const record = this.onDisk.get(path);
    if (stamp === undefined) return record === undefined;
    if ('problem' in stamp || record === undefined) return false;
    if (sameStamp(stamp, this.stamps.get(path))) return true;
    const read = readText(this.options.dir, path);
    return read !== undefined && 'text' in read && digestOf(read.text) === record.digest;
  }

  private commitWrite(op: Extract<PendingOp, { op: 'write' }>): string | undefined {
    const { dir, device } = this.options;
    if (!this.unchangedHere(op.path) && statFile(dir, op.path) !== undefined) {
      // Written here between the last read and now: that version is kept beside it.
      const aside = conflictName(op.path, this.now(), device);
      if (!moveAside(dir, op.path, aside)) {
        removeQuietly(dir, op.temp);
        return 'changed here at the same moment, and could not be moved aside';
      }
      this.say(
        'out',
        `kept ${op.path} as ${aside}: changed here while a change from another device arrived`,
      );
    }
    const stamp = commitTemp(dir, op.temp, op.path);
    if ('problem' in stamp) return stamp.problem;
    this.stamps.set(op.path, stamp);
    this.say('out', `received ${op.path}`);
    return undefined;
  }

  private commitRemove(op: Extract<PendingOp, { op: 'remove' }>): string | undefined {
    if (!this.unchangedHere(op.path)) {
      // Changed here since: the edit wins, and the next read sends it as a file of its own.
      this.stamps.delete(op.path);
      return undefined;
    }
    const problem = removeFile(this.options.dir, op.path);
    if (problem !== undefined) return problem;
    this.stamps.delete(op.path);
    this.say('out', `received ${op.path} (deleted)`);
    return undefined;
  }

  /** New files over the receive limits wait; a line when that starts, a retry later. */
  private hold(count: number): void {
    if (count === 0) {
      if (this.holding) this.say('out', 'every held file is written');
      this.holding = false;
      return;
    }
    if (!this.holding) {
      this.say(
        'problem',
        `holding ${count} new file(s) from other devices: ${this.budget.describe()}; they follow as the limit allows`,
      );
    }
    this.holding = true;
    clearTimeout(this.heldTimer);
    this.heldTimer = setTimeout(() => this.guarded(() => this.settle()), heldRetryMs);
  }

  /**
   * The batch a killed process recorded and did not finish: a file still as it was gets the new
   * version; one changed meanwhile is moved to a conflict copy first (read as a new file next).
   */
  private finishPending(pending: PendingOp[]): void {
    const { dir, device } = this.options;
    for (const op of pending) {
      const read = readText(dir, op.path);
      const now = read !== undefined && 'text' in read ? digestOf(read.text) : null;
      if (op.op === 'remove') {
        if (now === op.before) removeFile(dir, op.path);
        continue;
      }
      if (statFile(dir, op.temp) === undefined) continue; // put in place before the kill
      if (now !== op.before && now !== op.after && read !== undefined) {
        moveAside(dir, op.path, conflictName(op.path, this.now(), device));
      }
      const stamp = commitTemp(dir, op.temp, op.path);
      if ('problem' in stamp) this.onDisk.delete(op.path);
    }
  }
}

function newest(entries: FileEntry[]): FileEntry {
  return entries.reduce((a, b) => (b.time > a.time || (b.time === a.time && b.id > a.id) ? b : a));
}
