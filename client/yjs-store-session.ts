import * as Y from 'yjs';
import { isRelayErrorCode } from '../protocol/relay-codes.ts';
import { type E2EKey, seal } from './e2e-key.ts';
import { SyncError, type SyncErrorCode } from './errors.ts';
import type { RelayConnection } from './relay-connection.ts';
import type { StoredEntry, StoreFrame } from './relay-frames.ts';
import { type HostRequest, storeChunkBytes, type WithoutData } from './store-frames.ts';
import { HostSummary } from './yjs-host-summary.ts';
import { mergedInGroups, updateMessage } from './yjs-messages.ts';
import { Reassembler } from './yjs-reassembler.ts';
import { type StoreCursor, snapshotAfterBytes, storedUpdate } from './yjs-store-cursor.ts';
import { unseal } from './yjs-wire.ts';

export interface StoreSessionOptions {
  connection: RelayConnection;
  doc: Y.Doc;
  /** The document's name, for what is reported. */
  name: string;
  /** The document's name on the wire (see `docKeyOf`). */
  docKey: string;
  key: E2EKey | undefined;
  /** The origin of the transactions that apply what the host sends (the provider). */
  origin: unknown;
  cursor: StoreCursor;
  /** The relay's `message.maxBytes`: a larger entry goes in pieces. */
  maxMessageBytes: number;
  maxReceiveBytes: number;
  /** An entry that cannot be trusted (said once per code and device by the provider). */
  refused: (code: SyncErrorCode, device: string, message: string) => void;
  /** The host keeps no documents here, or refused an append (said once per session). */
  failed: (error: SyncError) => void;
  /** `settled` or `state` changed. */
  changed: () => void;
}

/**
 * How long local edits wait to be appended together: one append (and one acknowledgement, one
 * row on the host) per 0.3 s of typing instead of one per keystroke. What waits goes out
 * at once on `flush()` (`stored()`), and what a session ends with reaches the host at the next
 * connection (the diff after the catch-up); the other devices online get every edit at once
 * through the relay as before.
 */
export const appendDelayMs = 300;

/** What an append frame (of several, for a large message) stands for until acknowledged. */
interface Sent {
  update: Uint8Array;
  bytes: number;
  snapshot: boolean;
  /** Whether this frame is the last piece of its message (its ack acknowledges the message). */
  last: boolean;
}

/**
 * The device's side of the host's document store for one document on one connection: asks
 * for what the host holds after the cursor's position (`catchup`), applies it (pieces
 * reassembled, unsealed; what cannot be trusted is reported and skipped), then appends what the
 * document holds beyond the host (an edit made offline), then every local edit as it happens,
 * and a snapshot when enough has piled up since the last one. `settled` is true once caught up
 * with nothing of this device unacknowledged.
 */
export class StoreSession {
  /** `catching` until `caughtup`; `off` when this host keeps no documents (or refused one). */
  state: 'catching' | 'ready' | 'off' = 'catching';
  private readonly sent = new Map<number, Sent>();
  private readonly reassembler: Reassembler;
  private nextRef = 1;
  private messageCount = 0;
  private inbound: Promise<void> = Promise.resolve();
  private outbound: Promise<void> = Promise.resolve();
  /** The catch-up asked for; a broken snapshot makes it ask again for the raw entries. */
  private asked = { after: 0, snapshots: true };
  private brokenSnapshot = false;
  private snapshotDue = false;
  private stopped = false;
  /** Local edits waiting to be appended together (see `appendDelayMs`). */
  private waiting: Uint8Array[] = [];
  private waitingTimer: ReturnType<typeof setTimeout> | undefined;
  /** Waiting for the appends made so far: resolved when they are acknowledged. */
  private waiters: { ref: number; resolve: () => void; reject: (error: Error) => void }[] = [];
  private endWaiters: (() => void)[] = [];
  private readonly chunkBytes: number;
  /** Resolved once the first catch-up is over (and the appends it makes are queued). */
  private readonly ready: Promise<void>;
  private markReady: () => void = () => undefined;

  constructor(private readonly options: StoreSessionOptions) {
    this.chunkBytes = storeChunkBytes(options.maxMessageBytes, options.docKey);
    this.ready = new Promise((resolve) => {
      this.markReady = resolve;
    });
    this.reassembler = new Reassembler({
      check: options.key?.check,
      maxMessageBytes: options.maxReceiveBytes,
      maxHeldBytes: options.maxReceiveBytes,
      onDrop: (from, refusal) => options.refused(refusal.refused, from, refusal.message),
    });
  }

  /** Caught up with the host and every append acknowledged. */
  get settled(): boolean {
    return this.state === 'ready' && this.sent.size === 0 && this.waiting.length === 0;
  }

  /** Asks for what the host holds after the cursor's position. */
  start(): void {
    this.catchUp(true);
  }

  /** Stops for good (the provider is destroyed or the connection is gone). */
  stop(): void {
    this.stopped = true;
    // What waited is not lost: the next connection's diff carries it.
    clearTimeout(this.waitingTimer);
    this.waiting = [];
    this.reassembler.clear();
    this.markEnded();
    const error = new SyncError('closed', 'the connection ended before the host stored every edit');
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
  }

  /**
   * Resolves once the host has stored every edit appended so far (at once when the store is
   * off); rejects with `closed` when the connection ends first (the next one sends them).
   */
  async stored(): Promise<void> {
    // Edits made while catching up go in the append that follows the catch-up.
    if (this.state === 'catching') {
      await Promise.race([this.ready, this.ended()]);
    }
    this.appendWaiting();
    await this.outbound;
    if (this.stopped) throw new SyncError('closed', 'the connection ended');
    const last = this.nextRef - 1;
    if (this.state === 'off' || ![...this.sent.keys()].some((ref) => ref <= last)) return;
    return new Promise((resolve, reject) => this.waiters.push({ ref: last, resolve, reject }));
  }

  /**
   * A local edit: appended with the others of the next `appendDelayMs` when caught up, else with
   * the diff after the catch-up.
   */
  local(update: Uint8Array): void {
    if (this.state !== 'ready') return;
    this.waiting.push(update);
    this.waitingTimer ??= setTimeout(() => this.appendWaiting(), appendDelayMs);
  }

  /** Appends the local edits that wait, merged (a few MiB an append at most). */
  private appendWaiting(): void {
    clearTimeout(this.waitingTimer);
    this.waitingTimer = undefined;
    if (this.waiting.length === 0 || this.state !== 'ready') return;
    for (const update of mergedInGroups(this.waiting.splice(0))) this.append(update, false);
  }

  handle(frame: StoreFrame): void {
    if (this.stopped || frame.doc !== this.options.docKey) return;
    switch (frame.type) {
      case 'stored':
        for (const entry of frame.entries) this.queue(() => this.applyEntry(entry));
        return;
      case 'caughtup':
        this.queue(async () => this.caughtUp(frame.pos));
        return;
      case 'appended':
        this.acknowledged(frame.ref, frame.pos);
        return;
      case 'error':
        this.storeError(frame.code, frame.message, frame.ref);
        return;
    }
  }

  private catchUp(snapshots: boolean): void {
    const { docKey, key, cursor } = this.options;
    this.asked = { after: cursor.position, snapshots };
    this.brokenSnapshot = false;
    this.send({
      type: 'catchup',
      doc: docKey,
      after: cursor.position,
      ...(key === undefined ? {} : { kc: key.check }),
      ...(snapshots ? {} : { snapshots: false as const }),
    });
  }

  private queue(step: () => Promise<void>): void {
    this.inbound = this.inbound.then(() => (this.stopped ? undefined : step()));
  }

  private async applyEntry(entry: StoredEntry): Promise<void> {
    const { key, name, doc, origin, cursor } = this.options;
    const assembled = this.reassembler.accept(entry.from, {
      y: 1,
      doc: name,
      d: entry.data,
      ...(entry.kc === undefined ? {} : { kc: entry.kc }),
      ...(entry.part === undefined ? {} : { m: entry.part.m, i: entry.part.i, n: entry.part.n }),
    });
    if (assembled.kind === 'partial') return;
    const ours = entry.kc === key?.check;
    if (assembled.kind === 'refused') {
      this.options.refused(
        assembled.refused,
        entry.from,
        `${assembled.message} (kept by the host)`,
      );
      return;
    }
    const opened = await unseal(key, name, entry.from, assembled);
    const update = 'body' in opened ? storedUpdate(opened.body) : undefined;
    if (update === undefined) {
      if (ours && entry.covers !== undefined) this.brokenSnapshot = true;
      const message =
        'refused' in opened
          ? opened.message
          : `an entry the host keeps from device ${entry.from} is no document update; it was skipped`;
      this.options.refused(
        'refused' in opened ? opened.refused : 'invalid_payload',
        entry.from,
        message,
      );
      return;
    }
    try {
      Y.applyUpdate(doc, update, origin);
    } catch (err: unknown) {
      if (ours && entry.covers !== undefined) this.brokenSnapshot = true;
      this.options.refused(
        'invalid_payload',
        entry.from,
        `an entry the host keeps from device ${entry.from} could not be applied (${err instanceof Error ? err.message : String(err)}); it was skipped`,
      );
      return;
    }
    cursor.host.add(update);
    if (entry.covers !== undefined) cursor.restartSnapshotCount();
    else cursor.counted(assembled.bytes.length);
  }

  private async caughtUp(position: number): Promise<void> {
    const { cursor, doc } = this.options;
    if (this.brokenSnapshot && this.asked.snapshots) {
      // A snapshot sealed with this key did not open (forged or broken): the raw entries.
      cursor.position = this.asked.after;
      this.catchUp(false);
      return;
    }
    this.reassembler.clear();
    if (position < this.asked.after) {
      // The host holds less than this device believed (its store was replaced or lost): what
      // the document holds goes to it again, all of it.
      cursor.host = new HostSummary();
    }
    cursor.position = position;
    const first = this.state === 'catching';
    const missing = first ? cursor.host.missing(doc) : undefined;
    if (first) this.state = 'ready';
    this.snapshotDue = false;
    const complete = doc.store.pendingStructs === null && doc.store.pendingDs === null;
    let state: Uint8Array | undefined;
    const whole = () => {
      state ??= Y.encodeStateAsUpdate(doc);
      return state;
    };
    const lacking = missing?.length ?? 0;
    if (
      complete &&
      (cursor.wouldWantSnapshot(lacking, () => whole().length) ||
        // The host lacks most of the document (a first sync of a full folder): the whole state,
        // about as many bytes as the diff, goes as the snapshot, not the diff and then the same
        // content again.
        (lacking > snapshotAfterBytes && 2 * lacking >= whole().length))
    ) {
      this.append(whole(), true, cursor.position);
    } else {
      if (missing !== undefined) this.append(missing, false);
      // The document waits for updates it lacks: no snapshot can cover the position yet. The
      // next try comes after as many entries again, not at the next acknowledgement.
      if (!complete && cursor.wantsSnapshot(() => whole().length)) cursor.restartSnapshotCount();
    }
    if (first) this.markReady();
    this.options.changed();
  }

  /** Seals (when encrypted), cuts in pieces and sends one message, in order with the others. */
  private append(update: Uint8Array, snapshot: boolean, covers?: number): void {
    // a viewer's device keeps its edits local: the host would refuse them
    if (this.options.connection.readOnly) return;
    const { key, docKey } = this.options;
    const { chunkBytes } = this;
    this.messageCount += 1;
    const id = `a${this.messageCount}`;
    this.outbound = this.outbound.then(async () => {
      if (this.stopped || this.state === 'off') return;
      const body = updateMessage(update);
      const bytes = key === undefined ? body : await seal(key, body);
      const n = Math.ceil(bytes.length / chunkBytes);
      for (let i = 0; i < n; i += 1) {
        const ref = this.nextRef;
        this.nextRef += 1;
        this.sent.set(ref, { update, bytes: bytes.length, snapshot, last: i === n - 1 });
        const data = bytes.subarray(i * chunkBytes, (i + 1) * chunkBytes);
        const sealed = key === undefined ? {} : { kc: key.check, kp: key.proof };
        const part = n === 1 ? {} : { part: { m: id, i, n } };
        const cover = covers === undefined ? {} : { covers };
        this.send({ type: 'append', doc: docKey, ref, ...sealed, ...cover, ...part }, data);
      }
    });
  }

  private acknowledged(ref: number, position: number): void {
    const sent = this.sent.get(ref);
    if (sent === undefined) return;
    this.sent.delete(ref);
    const { cursor } = this.options;
    // Nothing between the last position applied and this one: the device holds it all.
    if (position === cursor.position + 1) cursor.position = position;
    this.settleWaiters();
    if (!sent.last) return;
    cursor.host.add(sent.update);
    if (sent.snapshot) cursor.restartSnapshotCount();
    else cursor.counted(sent.bytes);
    if (
      !this.snapshotDue &&
      this.state === 'ready' &&
      this.sent.size === 0 &&
      cursor.wantsSnapshot(() => Y.encodeStateAsUpdate(this.options.doc).length)
    ) {
      // Caught up first, so the snapshot covers everything up to the host's last position;
      // only once every append is acknowledged, so the catch-up does not send this device's
      // own appends back to it.
      this.snapshotDue = true;
      this.catchUp(true);
    }
    if (this.sent.size === 0) this.options.changed();
  }

  /** Resolves when the session stops. */
  private ended(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  private markEnded(): void {
    for (const resolve of this.endWaiters.splice(0)) resolve();
  }

  private settleWaiters(): void {
    const oldest = Math.min(...this.sent.keys());
    this.waiters = this.waiters.filter((waiter) => {
      if (waiter.ref >= oldest) return true;
      waiter.resolve();
      return false;
    });
  }

  private storeError(code: string, message: string, ref: number | undefined): void {
    if (code !== 'store_full' && code !== 'store_unavailable') {
      // A refused append is not waited for: the next join's diff sends what it carried.
      if (ref !== undefined && this.sent.delete(ref)) {
        this.settleWaiters();
        this.options.changed();
      }
      this.options.failed(new SyncError(isRelayErrorCode(code) ? code : 'relay_error', message));
      return;
    }
    if (this.state === 'off') return;
    this.state = 'off';
    this.sent.clear();
    this.settleWaiters();
    this.markReady();
    this.options.failed(
      new SyncError(
        code,
        code === 'store_full'
          ? `the host is full and keeps no more of this document (${message}); devices online still sync`
          : `the host keeps no documents (${message}); devices sync only while online together`,
      ),
    );
    this.options.changed();
  }

  /** Sends a store frame; `data` goes last, as base64, where the host parses around it. */
  private send(frame: HostRequest | WithoutData<HostRequest>, data?: Uint8Array): void {
    try {
      this.options.connection.sendStoreFrame(frame, data);
    } catch (err: unknown) {
      // The connection is gone: the next one catches up and sends what the host lacks.
      if (err instanceof SyncError) return;
      throw err;
    }
  }
}
