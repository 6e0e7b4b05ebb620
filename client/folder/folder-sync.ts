import { randomBytes } from 'node:crypto';
import * as Y from 'yjs';
import type { StoreProgress } from '../yjs-store-cursor.ts';
import { textVersions } from './ancestors.ts';
import type { BlobNotice } from './blob-notices.ts';
import { BlobQueue, type Transfer } from './blob-queue.ts';
import type { BlobTransfer } from './blob-transfer.ts';
import { type ChunkKeeper, keeperOf } from './chunk-keeper.ts';
import { applyClashFixes, clashFixes } from './conflicts.ts';
import { Disk, type Stamp } from './disk.ts';
import type { BlobVersion } from './document.ts';
import { EntryIndex } from './entry-index.ts';
import type { FileSystem } from './file-system.ts';
import { folderMarker, folderThere, markerId, writeMarker } from './marker.ts';
import { type FolderLog, FolderMirror } from './mirror.ts';
import { ReceiveBudget, type ReceiveLimits } from './receive-budget.ts';
import { publishBlob, readFolder } from './scan.ts';
import { type DiskRecord, FolderState, type PendingOp } from './state-log.ts';
import { folderStatus, liveFiles, UnconfirmedFiles } from './status.ts';
import { KeptLocal, syncIgnoreName } from './syncignore.ts';
import { finishPending, writeFolder } from './write.ts';

/**
 * Origins of the folder sync's own transactions: what it read here, the state log at a start,
 * the host's history at a first start. Any other origin is a change from elsewhere (another
 * device through the provider, a version put back from the history) to be written here.
 */
const localOrigin = 'folder';
const stateOrigin = 'state';
const historyOrigin = 'history';
const ownOrigins = new Set<unknown>([localOrigin, stateOrigin, historyOrigin]);
/** How long changes from other devices collect before they are written (a burst is one batch). */
const remoteSettleMs = 20;

export { folderMarker } from './marker.ts';
export type { FolderLog } from './mirror.ts';

export interface FolderSyncOptions {
  /** The folder (its real path). */
  dir: string;
  /** The state log of this folder and project. */
  stateFile: string;
  /** This device's id: new entries and conflict copies are named by it. */
  device: string;
  /** One call per line to print; the caller escapes names for its terminal. */
  log: FolderLog;
  limits?: ReceiveLimits;
  now?: () => number;
  /** Called after a batch of disk changes is recorded and before the files change (tests stop there). */
  onRecorded?: () => void;
  /** What moves files that are not text (client/chunks); without it, they are skipped here. */
  transfer?: () => BlobTransfer | undefined;
  /** Files larger than this are not synced (1 GiB by default). */
  maxFileBytes?: number;
  /** How a text changed here becomes edits (region by region; the benchmark's reference swaps it). */
  editText?: (text: Y.Text, content: string) => void;
  /** The file system of the folder and the state log (the real one by default; tests swap it). */
  fs?: FileSystem;
  /** Whether permission bits sync (true; false for `--no-perms`: neither read nor written). */
  perms?: boolean;
  /** How long a prefetch no notice touched is kept (5 minutes; prefetch.ts). */
  prefetchIdleMs?: number;
}

/**
 * Keeps a folder of files and the folder document in step. One Y.Doc, `shared`, which the
 * provider syncs with the other devices. Changes read from the folder are made on it (scan.ts:
 * as edits from the text each file had, so they merge exactly). Changes from other devices
 * apply to it as they arrive; each text they change whose file was in step keeps, at that
 * moment, the text it had as its base (an edit saved here meanwhile then merges three ways:
 * base, the file, the document), and the files of the entries they touched are written in
 * batches (write.ts). What the folder holds is not a second document but, per file, the
 * digest of the content it had when last read or written (`onDisk`) and that base where the
 * document moved on. See document.ts for the document and state-log.ts for what survives a
 * crash.
 */
export class FolderSync {
  readonly shared = new Y.Doc();
  /** The folder document's place on the host as the last run left it (see `close`). */
  readonly storeProgress: StoreProgress | undefined;
  private readonly files = this.shared.getMap<unknown>('files');
  private readonly index: EntryIndex;
  private readonly mirror: FolderMirror;
  private readonly state: FolderState;
  private readonly budget: ReceiveBudget;
  private unsaved: Uint8Array[] = [];
  /** Entries changed from elsewhere since the last batch: their files are written next. */
  private readonly remoteTouched = new Set<string>();
  /** Paths the watcher named since the last scan; `full` when it could not say. */
  private readonly noticed = new Set<string>();
  private fullScanDue = false;
  /** A write of the state log failed: the next one rewrites it whole first. */
  private rewriteDue = false;
  private remoteTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  private keeper: ChunkKeeper | undefined;
  /** How long the last full scan took. */
  lastFullScanMs = 0;
  /** Called when a file sent as chunks was published (the caller confirms it with the relay). */
  onChange: (() => void) | undefined;
  /** Files read here whose change the relay has not confirmed (see `markSent`). */
  readonly unconfirmed = new UnconfirmedFiles();

  constructor(private readonly options: FolderSyncOptions) {
    const now = options.now ?? Date.now;
    this.budget = new ReceiveBudget(options.limits, now);
    this.shared.on('update', (update: Uint8Array) => this.unsaved.push(update));
    const disk = new Disk(options.dir, options.fs);
    const opened = FolderState.open(options.stateFile, this.shared, stateOrigin, disk.fs);
    this.state = opened.state;
    this.storeProgress = opened.store;
    this.unsaved = [];
    this.index = new EntryIndex(this.files);
    this.files.observeDeep((events) => this.index.forgetChanged(events));
    this.mirror = new FolderMirror(
      disk,
      options.device,
      this.shared,
      this.files,
      this.index,
      opened.onDisk,
      options.log,
      now,
      opened.bases,
    );
    if (options.maxFileBytes !== undefined) this.mirror.maxFileBytes = options.maxFileBytes;
    if (options.perms === false) this.mirror.perms = false;
    if (options.editText !== undefined) this.mirror.editText = options.editText;
    if (options.transfer !== undefined) {
      this.mirror.blobs = this.blobQueue(options.transfer);
      this.keeper = keeperOf(options.dir, options.transfer, this.index, this.mirror, now);
    }
    this.mirror.keptLocal = new KeptLocal(opened.state.keptLocal);
    this.mirror.refreshRules();
    for (const [path, record] of opened.onDisk) {
      this.mirror.retryLater(path);
      if (record.stamp !== undefined) this.mirror.setStamp(path, record.stamp);
    }
    const { device } = options;
    const { lost, merge } = finishPending(disk, device, opened.pending, now(), opened.bases);
    this.mirror.setRecords(new Map(lost.map((path) => [path, null])));
    this.mirror.backToBase(merge);
    this.giveFolderAnId(opened.onDisk.size === 0);
    this.state.compact(this.shared, this.mirror.onDisk, this.mirror.bases);
    this.files.observeDeep((events, transaction) => {
      if (ownOrigins.has(transaction.origin) || this.closed) return;
      for (const id of this.mirror.keepBasesOf(events)) this.remoteTouched.add(id);
      // At most one batch per period, also while changes keep coming.
      this.remoteTimer ??= setTimeout(() => {
        this.remoteTimer = undefined;
        this.guarded(() => this.flushRemote());
      }, remoteSettleMs);
    });
  }

  /**
   * Whether this is the folder's first `sync` on this device with files in it already: no file
   * was ever recorded here (the state log is new or was deleted).
   */
  get firstRunWithFiles(): boolean {
    if (this.mirror.onDisk.size > 0) return false;
    const { disk } = this.mirror;
    return disk.fs.readdir(disk.root).some((entry) => entry.name.toString() !== folderMarker);
  }

  /**
   * Before the first scan of a first run: the folder document as the host's history has it
   * (`updates`, oldest first), taken as received, and those versions at hand for the files found
   * here that other devices have too (their common ancestor, ancestors.ts). The first
   * scan then reads the folder against it; the versions are let go after it.
   */
  startFrom(updates: Uint8Array[]): void {
    if (updates.length === 0) return;
    Y.applyUpdate(this.shared, Y.mergeUpdates(updates), historyOrigin);
    this.mirror.ancestors = (ids) => textVersions(updates, ids);
  }

  /** Reads the whole folder and sends what changed since the last agreement; writes what is due. */
  scan(): void {
    if (this.closed || !this.folderThere()) return;
    const started = performance.now();
    this.noticed.clear();
    this.fullScanDue = false;
    this.mirror.refreshRules();
    this.read(['']);
    this.mirror.settleKeptLocal(false);
    this.mirror.ancestors = undefined;
    this.lastFullScanMs = performance.now() - started;
    this.applyRemote();
    this.settle();
  }

  /** A path the watcher named (relative to the folder), or null when it named none. */
  notice(path: string | null): void {
    // No name, or one that is not valid UTF-8 on disk (decoded with U+FFFD): the whole folder.
    if (path === null || path.includes('\ufffd')) this.fullScanDue = true;
    else this.noticed.add(path.split('\\').join('/'));
  }

  /** Reads what the watcher named since the last scan (all of it when it could not say). */
  scanNoticed(): void {
    if (this.fullScanDue || this.mirror.refreshRules()) {
      this.scan();
      return;
    }
    if (this.closed || !this.folderThere()) return;
    this.readNoticed();
    this.applyRemote();
    this.settle();
  }

  /** Every change of other devices received so far, applied to the folder now. */
  flushRemote(): void {
    clearTimeout(this.remoteTimer);
    this.remoteTimer = undefined;
    if (this.closed || !this.folderThere()) return;
    if (this.mirror.refreshRules()) this.read(['']);
    this.applyRemote();
    this.settle();
  }

  /**
   * Stops the timers and writes the state one last time, with `store` (the folder document's
   * place on the host) when the folder's document holds everything it stands for.
   */
  close(store?: StoreProgress): void {
    if (this.closed) return;
    this.guarded(() => this.flushRemote());
    this.halt();
    this.persist(store !== undefined ? { store } : {});
    this.state.compact(this.shared, this.mirror.onDisk, this.mirror.bases);
    this.state.close();
  }

  /** Stops the timers and writes nothing more: what a process killed now leaves behind. */
  halt(): void {
    this.state.close();
    this.closed = true;
    this.mirror.blobs?.close();
    this.keeper?.close();
    clearTimeout(this.remoteTimer);
    this.budget.close();
  }

  /** The live files, for the host's folder report. */
  liveFiles() {
    return liveFiles(this.index, this.mirror);
  }

  /** Transfers of files kept as chunks that wait: tried now (the connection is back). */
  resume(): void {
    this.mirror.blobs?.resume();
    this.keeper?.resume();
  }

  /** The host dropped these chunks as damaged: the files here that hold them put them back. */
  async chunksLost(ids: string[]): Promise<void> {
    await this.keeper?.lost(ids);
  }

  /** A notice of another device's upload under way: its chunks may be fetched ahead. */
  prefetch(from: string, notice: BlobNotice): void {
    if (!this.closed) this.mirror.blobs?.prefetches.notice(from, notice);
  }

  /** The transfers running now, for the progress line. */
  transfers(): Transfer[] {
    return [...(this.mirror.blobs?.active.values() ?? [])];
  }

  private blobQueue(transfer: () => BlobTransfer | undefined): BlobQueue {
    const { mirror } = this;
    return new BlobQueue({
      dir: this.options.dir,
      disk: mirror.disk,
      transfer,
      recordDigest: (path) => mirror.onDisk.get(path)?.digest,
      publish: (path, stamp, file) => this.guarded(() => this.publish(path, stamp, file)),
      unchanged: (path, stamp) =>
        this.guarded(() => {
          const changes = mirror.restamp(path, stamp, !this.closed);
          if (changes.size > 0) this.persist({ disk: changes });
          const same = this.blobWithOtherMeta(path, stamp);
          if (same !== undefined) this.publish(path, stamp, same);
        }),
      ignores: (path) => mirror.ignores(path),
      maxFileBytes: () => mirror.maxFileBytes,
      prefetchIdleMs: this.options.prefetchIdleMs,
      wanted: (path, version) => this.index.winnerAt(path)?.blob?.v === version,
      downloaded: (path) => {
        mirror.retryLater(path);
        this.guarded(() => this.flushRemote());
      },
      say: (kind, line) => mirror.say(kind, line),
      sayOnce: (key, line) => mirror.sayOnce(key, line),
      unsay: (key) => mirror.unsay(key),
    });
  }

  /** A version of a file sent as chunks goes in the document (the host holds its chunks). */
  private publish(
    path: string,
    stamp: Stamp,
    file: { size: number; digest: string; chunks: [string, number][] },
  ): void {
    if (this.closed || !this.folderThere()) return;
    const { mirror } = this;
    const changes = publishBlob(mirror, localOrigin, path, file, stamp);
    mirror.setStamp(path, stamp);
    mirror.setRecords(changes);
    this.unconfirmed.changed(path, file.size);
    this.persist({ disk: changes });
    this.onChange?.();
    this.settle();
  }

  /**
   * The current version of the file kept as chunks at `path`, read again with the same content,
   * when its time or mode changed here (or the version, from an older one, has no time): it is
   * sent again as a new version of the same chunks. Undefined otherwise.
   */
  private blobWithOtherMeta(path: string, stamp: Stamp): BlobVersion | undefined {
    if (this.closed) return undefined;
    const record = this.mirror.onDisk.get(path);
    const entry = record === undefined ? undefined : this.index.get(record.id);
    if (typeof entry !== 'object' || entry.blob === undefined || entry.path !== path) return;
    if (!this.index.isLive(entry.id) || this.index.digest(entry.id) !== record!.digest) return;
    const meta = this.mirror.metaOf(stamp);
    const differs =
      entry.blob.mtime !== meta.mtime || (meta.mode !== undefined && entry.blob.mode !== meta.mode);
    return differs ? entry.blob : undefined;
  }

  /** What `status` shows: files waiting up and down, conflict copies, files not synced. */
  folderStatus() {
    return folderStatus(this.index, this.mirror);
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

  /**
   * Whether the folder is there (its marker); when the marker there is not the one this folder
   * was given (made anew by hand after the folder was emptied or removed), the folder starts
   * afresh first: nothing missing from it is taken for deleted.
   */
  private folderThere(): boolean {
    if (!folderThere(this.mirror)) return false;
    if (markerId(this.mirror.disk) !== this.state.folderId) this.startAfresh();
    return true;
  }

  /**
   * The folder's id, in the state log and in its marker, for a folder that has none yet (its
   * first start, or a log from before ids): a marker made later by hand lacks it. The marker is
   * written at a first start; a folder with records and no marker is gone until it is back.
   */
  private giveFolderAnId(firstStart: boolean): void {
    if (this.state.folderId !== undefined) return;
    const id = randomBytes(12).toString('hex');
    const found = markerId(this.mirror.disk);
    this.state.setFolderId(id);
    if (found !== null) writeMarker(this.mirror.disk, id, true);
    else if (firstStart) writeMarker(this.mirror.disk, id);
  }

  /**
   * The folder as at a first start: no file is known to be on disk any more, so a file missing
   * is written back from the document instead of sent as deleted, and a file there is read as
   * new (the same text is the same file; another is settled as a conflict).
   */
  private startAfresh(): void {
    const forgotten = new Map<string, DiskRecord | null>();
    for (const path of this.mirror.onDisk.keys()) forgotten.set(path, null);
    for (const path of forgotten.keys()) this.mirror.forgetStamp(path);
    this.mirror.setRecords(forgotten);
    for (const path of this.index.paths()) this.mirror.retryLater(path);
    this.persist({ disk: forgotten });
    writeMarker(this.mirror.disk, this.state.folderId!, true);
    this.options.log({
      kind: 'problem',
      line: `${folderMarker} was made anew: the folder starts afresh (files here are read as new, files missing are written back; nothing is deleted)`,
    });
  }

  /**
   * The entries changed from elsewhere since the last batch, after the files the watcher named
   * were read: the same insert made here and there at once kept once, and the files of those
   * entries that changed here since they were last read are read again (an edit saved here
   * that the watcher has not named yet merges three ways with the base each kept, instead of
   * being written over).
   */
  private applyRemote(): void {
    if (this.remoteTouched.size === 0) return;
    this.readNoticed();
    const ids = [...this.remoteTouched];
    this.remoteTouched.clear();
    const changedHere = this.mirror.changedSinceRead(ids);
    this.shared.transact(() => this.mirror.dropTwins(ids), localOrigin);
    if (changedHere.length > 0) this.read(changedHere);
  }

  private readNoticed(): void {
    const scopes = [...this.noticed, ...this.mirror.takeReadAgain()];
    this.noticed.clear();
    if (scopes.length > 0) this.read(scopes);
  }

  private read(scopes: string[]): void {
    const changes = readFolder(this.mirror, localOrigin, scopes);
    this.mirror.setRecords(changes);
    for (const path of changes.keys()) {
      this.unconfirmed.changed(path, this.mirror.stampOf(path)?.size ?? 0);
    }
    if (changes.size > 0 || this.unsaved.length > 0 || this.mirror.keptLocal.unsaved)
      this.persist({ disk: changes });
    // The rules were edited here: what was kept here and they now let through is sent.
    if (changes.has(syncIgnoreName)) {
      this.mirror.refreshRules();
      const freed = this.mirror.settleKeptLocal(true);
      if (freed.length > 0) this.read(freed);
    }
  }

  private persist(record: {
    disk?: Map<string, DiskRecord | null>;
    pending?: PendingOp[];
    done?: boolean;
    store?: StoreProgress;
  }): void {
    const update = this.unsaved.length === 0 ? undefined : Y.mergeUpdates(this.unsaved.splice(0));
    const bases = this.mirror.takeBaseChanges();
    const keptLocal = this.mirror.keptLocal.take();
    try {
      // After a write that failed, the log is rewritten whole from what is known here first:
      // nothing the failed write held is missing from it.
      if (this.rewriteDue) this.state.compact(this.shared, this.mirror.onDisk, this.mirror.bases);
      this.rewriteDue = false;
      this.state.append({ ...record, update, bases, keptLocal });
    } catch (err: unknown) {
      this.rewriteDue = true;
      throw err;
    }
  }

  /** Runs a write of `paths`; when it fails (the state log could not be written), they wait for the next settle. */
  private retryOnFailure<T>(paths: Set<string>, write: () => T): T {
    try {
      return write();
    } catch (err: unknown) {
      for (const path of paths) this.mirror.retryLater(path);
      throw err;
    }
  }

  /** Settles the clashes of the entries that changed, then writes what they need. */
  private settle(rounds = 0): void {
    const touched = new Set<string>();
    for (let round = 0; round < 4; round += 1) {
      const changed = this.index.takeChanged();
      for (const id of changed) touched.add(id);
      const fixes = clashFixes(this.index, changed);
      if (fixes.length === 0) break;
      let lines: string[] = [];
      this.shared.transact(() => {
        lines = applyClashFixes(this.index, fixes);
      }, localOrigin);
      for (const line of lines) this.mirror.say('out', line);
    }
    for (const id of this.index.takeChanged()) touched.add(id);
    let paths = this.mirror.takeRetries();
    for (const id of touched) {
      const entry = this.index.get(id);
      if (typeof entry === 'string') this.mirror.reportBadEntry(id, entry);
      const path = this.index.pathOf(id);
      if (path !== undefined) paths.add(path);
      for (const diskPath of this.mirror.diskPathsOf(id)) paths.add(diskPath);
    }
    let held = 0;
    let rulesWritten = false;
    // A write under a folder that a file of this batch was still in the way of goes next.
    for (let round = 0; round < 3; round += 1) {
      rulesWritten ||= paths.has(syncIgnoreName);
      const batch = paths;
      const written = this.retryOnFailure(batch, () =>
        writeFolder(
          this.mirror,
          batch,
          this.budget,
          (r) => this.persist(r),
          this.options.onRecorded,
        ),
      );
      held = Math.max(held, written.held);
      if (!written.blocked) break;
      paths = this.mirror.takeRetries();
    }
    // New files over the receive limits wait; a line when that starts, a retry later.
    this.budget.hold(
      held,
      (kind, line) => this.mirror.say(kind, line),
      () => this.guarded(() => this.settle()),
    );
    if (this.unsaved.length > 0) this.persist({});
    if (this.state.wantsCompaction)
      this.state.compact(this.shared, this.mirror.onDisk, this.mirror.bases);
    // Rules another device sent were just written: what they let through goes now, not at the
    // next scan (once: the rules do not change again without a new write).
    if (rulesWritten && this.mirror.refreshRules()) {
      this.read(['']);
      this.settle();
    }
    // Texts saved here while their writes were due: merged now, then written (after a few
    // rounds of an editor saving again each time, at the next read).
    const due = this.mirror.takeMergeDue();
    if (due.length > 0 && rounds >= 3) for (const path of due) this.mirror.readLater(path);
    else if (due.length > 0) {
      this.read(due);
      this.settle(rounds + 1);
    }
  }
}
