import { Awareness, removeAwarenessStates } from 'y-protocols/awareness';
import * as Y from 'yjs';
import { docKeyOf } from './doc-key.ts';
import { deriveE2EKey, type E2EKey } from './e2e-key.ts';
import { Emitter } from './emitter.ts';
import { SyncError, type SyncErrorCode } from './errors.ts';
import type { RelayConnection } from './relay-connection.ts';
import type { JoinedFrame, PresenceFrame, RoutedMessage, StoreFrame } from './relay-frames.ts';
import {
  applyMessage,
  awarenessMessage,
  RemoteOrigin,
  step1Message,
  updateMessage,
} from './yjs-messages.ts';
import { YjsOutbox } from './yjs-outbox.ts';
import {
  defaultMaxReceiveBytes,
  type YjsProviderEvents,
  type YjsProviderOptions,
} from './yjs-provider-options.ts';
import { Reassembler } from './yjs-reassembler.ts';

export { defaultMaxReceiveBytes, type YjsProviderEvents, type YjsProviderOptions };

import { StoreCursor } from './yjs-store-cursor.ts';
import { StoreSession } from './yjs-store-session.ts';
import { isYjsPayload, keyRefusal, unseal } from './yjs-wire.ts';

/**
 * Keeps a `Y.Doc` in step with the other devices of a relay room. Every device holds the whole
 * document; the relay only carries the y-protocols messages (as base64 in JSON payloads, sealed
 * with AES-GCM when a passphrase is given). On every join, the first and each rejoin, the
 * device broadcasts sync step 1 (its state vector); each device present answers with step 2
 * (what the newcomer lacks) and its own step 1, which the newcomer answers the same way. So a
 * device that was away for longer than the relay's buffer, with offline edits of its own,
 * converges with whoever is in the room. Edits made while joined are broadcast as updates, and
 * the relay buffers them for devices briefly away.
 */
export class YjsProvider extends Emitter<YjsProviderEvents> {
  readonly doc: Y.Doc;
  readonly awareness: Awareness;
  readonly name: string;
  /** The name the relay and the host see: `name`, or a keyed digest of it when encrypted. */
  readonly docKey: string;
  readonly connection: RelayConnection;
  /** The document's place on the host. */
  readonly store: StoreCursor;
  /** Whether messages are end-to-end encrypted. */
  readonly encrypted: boolean;
  private readonly key: E2EKey | undefined;
  private readonly ownsAwareness: boolean;
  private readonly outbox: YjsOutbox;
  private readonly reassembler: Reassembler;
  /** Awareness client ids seen from each device, removed when the device leaves. */
  private readonly clientsByDevice = new Map<string, Set<number>>();
  /** Errors already reported, by code and device, so a stream of refused messages says it once. */
  private readonly reported = new Set<string>();
  private readonly stops: (() => void)[] = [];
  private readonly maxReceiveBytes: number;
  private readonly maxMessageBytes: number;
  /** The store's side of the current session (since the last join). */
  private session: StoreSession | undefined;
  /** A device in the room answered this one's state in the current session. */
  private peerAnswered = false;
  private inbound: Promise<void> = Promise.resolve();
  private isSynced = false;
  private destroyed = false;

  /**
   * Use `createYjsProvider`, which derives the key first. Throws `invalid_options` for a
   * `maxReceiveBytes` that is not a whole number ≥ 1, or a `maxMessageBytes` too small for data.
   */
  constructor(options: YjsProviderOptions, key: E2EKey | undefined) {
    super();
    const maxReceiveBytes = options.maxReceiveBytes ?? defaultMaxReceiveBytes;
    if (!Number.isSafeInteger(maxReceiveBytes) || maxReceiveBytes < 1) {
      throw new SyncError(
        'invalid_options',
        `maxReceiveBytes must be a whole number of bytes ≥ 1, not ${maxReceiveBytes}`,
      );
    }
    this.connection = options.connection;
    this.doc = options.doc ?? new Y.Doc();
    this.name = options.name ?? 'default';
    this.docKey = docKeyOf(this.name, key);
    this.store = options.store ?? new StoreCursor();
    this.store.bind(this.docKey);
    this.maxReceiveBytes = maxReceiveBytes;
    this.maxMessageBytes = options.maxMessageBytes ?? 1_048_576;
    this.ownsAwareness = options.awareness === undefined;
    this.awareness = options.awareness ?? new Awareness(this.doc);
    this.key = key;
    this.encrypted = key !== undefined;
    this.outbox = new YjsOutbox(this.connection, {
      doc: this.docKey,
      key,
      maxMessageBytes: this.maxMessageBytes,
      onError: (error) => this.emit('error', error),
    });
    this.reassembler = new Reassembler({
      check: key?.check,
      maxMessageBytes: maxReceiveBytes,
      maxHeldBytes: maxReceiveBytes,
      onDrop: (from, refusal) => this.report(refusal.refused, from, refusal.message),
    });
    const connection = this.connection;
    this.doc.on('update', this.docOnUpdate);
    this.awareness.on('update', this.awarenessOnUpdate);
    this.stops.push(
      () => this.doc.off('update', this.docOnUpdate),
      () => this.awareness.off('update', this.awarenessOnUpdate),
      connection.on('joined', (frame) => this.connectionOnJoined(frame)),
      connection.on('message', (message) => this.connectionOnMessage(message)),
      connection.on('presence', (frame) => this.connectionOnPresence(frame)),
      connection.on('store', (frame) => this.connectionOnStore(frame)),
      connection.on('error', (error) => {
        // A host from before the store does not know `catchup`: it keeps no documents.
        if (error.code === 'invalid_message' && this.session?.state === 'catching') {
          this.session.handle({
            type: 'error',
            doc: this.docKey,
            code: 'store_unavailable',
            message: error.message,
          });
        }
      }),
      connection.on('state', (state) => {
        if (state === 'joined') return;
        this.endSession();
        this.setSynced(false);
      }),
    );
    if (connection.state === 'joined') this.startSession(connection.devices);
  }

  /** Whether caught up with the host (see the `synced` event) since the last (re)join. */
  get synced(): boolean {
    return this.isSynced;
  }

  /** The other devices in the room. */
  get peers(): string[] {
    const self = String(this.connection.device);
    return this.connection.devices.filter((device) => device !== self);
  }

  /**
   * Bytes held of messages still arriving in pieces (every device's together, at most
   * `maxReceiveBytes`); 0 when none is unfinished.
   */
  get pendingReceiveBytes(): number {
    return this.reassembler.heldBytes;
  }

  /** Resolves when `synced` is (or becomes) true. */
  whenSynced(): Promise<void> {
    if (this.isSynced) return Promise.resolve();
    return new Promise((resolve) => {
      const stop = this.on('synced', (synced) => {
        if (!synced) return;
        stop();
        resolve();
      });
    });
  }

  /**
   * Resolves once every message handed to the connection so far has reached the relay, and
   * the host has stored every edit of this device sent so far (where it keeps documents).
   * Rejects with `closed` when the connection ends first.
   */
  async flush(): Promise<void> {
    await this.outbox.flush();
    await this.session?.stored();
  }

  /**
   * Stops listening to the document and the connection; tells the others this device's cursor
   * is gone. Leaves the document and the connection open.
   */
  destroy(): void {
    if (this.destroyed) return;
    if (this.connection.state === 'joined') {
      removeAwarenessStates(this.awareness, [this.doc.clientID], 'destroy');
    }
    this.destroyed = true;
    this.endSession();
    for (const stop of this.stops.splice(0)) stop();
    this.reassembler.clear();
    if (this.ownsAwareness) this.awareness.destroy();
  }

  private readonly docOnUpdate = (update: Uint8Array, origin: unknown): void => {
    // What is made while away reaches the others at the rejoin (sync step 1, the catch-up).
    // a viewer's device keeps its edits local: the others would ignore them
    if (origin === this || this.connection.state !== 'joined' || this.connection.readOnly) return;
    this.send('broadcast', updateMessage(update));
    this.session?.local(update);
  };

  private readonly awarenessOnUpdate = (
    changes: { added: number[]; updated: number[]; removed: number[] },
    origin: unknown,
  ): void => {
    const { added, updated, removed } = changes;
    if (origin instanceof RemoteOrigin) {
      let clients = this.clientsByDevice.get(origin.device);
      if (clients === undefined) {
        clients = new Set();
        this.clientsByDevice.set(origin.device, clients);
      }
      for (const client of [...added, ...updated]) clients.add(client);
      for (const client of removed) clients.delete(client);
      return;
    }
    if (origin === 'presence' || this.connection.state !== 'joined') return;
    const changed = [...added, ...updated, ...removed];
    if (!changed.includes(this.doc.clientID) && origin !== 'destroy') return;
    this.send('broadcast', awarenessMessage(this.awareness, changed));
  };

  private connectionOnJoined(frame: JoinedFrame): void {
    this.startSession(frame.devices);
  }

  /** After each join: state vector to everyone, own cursor to everyone, gone devices forgotten. */
  private startSession(devices: string[]): void {
    const present = new Set(devices);
    for (const device of [...this.clientsByDevice.keys()]) {
      if (!present.has(device)) this.deviceLeft(device);
    }
    this.reassembler.keepOnly(present);
    this.reported.clear();
    this.startStoreSession();
    this.send('broadcast', step1Message(this.doc));
    if (this.awareness.getLocalState() !== null) {
      this.send('broadcast', awarenessMessage(this.awareness, [this.doc.clientID]));
    }
    this.emit('peers', this.peers);
    this.checkSynced();
  }

  /** Catches up with the host; what arrives comes through `connectionOnStore`. */
  private startStoreSession(): void {
    this.endSession();
    this.peerAnswered = false;
    this.session = new StoreSession({
      connection: this.connection,
      doc: this.doc,
      name: this.name,
      docKey: this.docKey,
      key: this.key,
      origin: this,
      cursor: this.store,
      maxMessageBytes: this.maxMessageBytes,
      maxReceiveBytes: this.maxReceiveBytes,
      refused: (code, device, message) => this.report(code, device, message),
      failed: (error) => {
        const key = `${error.code} store`;
        if (this.reported.has(key)) return;
        this.reported.add(key);
        this.emit('error', error);
      },
      changed: () => this.checkSynced(),
    });
    this.session.start();
  }

  private endSession(): void {
    this.session?.stop();
    this.session = undefined;
  }

  private connectionOnStore(frame: StoreFrame): void {
    this.session?.handle(frame);
  }

  /**
   * Synced: caught up with the host and this device's appends acknowledged; where the host keeps
   * no documents, once a device answered (or none is there), as before the host kept them.
   */
  private checkSynced(): void {
    const session = this.session;
    if (session === undefined) return;
    if (session.state === 'off') {
      if (this.peerAnswered || this.peers.length === 0) this.setSynced(true);
    } else if (session.settled) {
      this.setSynced(true);
    }
  }

  private connectionOnPresence(frame: PresenceFrame): void {
    if (frame.state === 'joined') {
      // The newcomer broadcasts its step 1; it needs this device's cursor.
      if (this.awareness.getLocalState() !== null) {
        this.send(frame.device, awarenessMessage(this.awareness, [this.doc.clientID]));
      }
    } else {
      this.deviceLeft(frame.device);
    }
    this.emit('peers', this.peers);
  }

  /** A device left: its cursors and what it sent of an unfinished message are dropped. */
  private deviceLeft(device: string): void {
    this.reassembler.forget(device);
    const clients = this.clientsByDevice.get(device);
    this.clientsByDevice.delete(device);
    if (clients !== undefined && clients.size > 0) {
      removeAwarenessStates(this.awareness, [...clients], 'presence');
    }
  }

  private connectionOnMessage(message: RoutedMessage): void {
    const { payload, from } = message;
    if (!isYjsPayload(payload)) return;
    if (payload.doc !== this.docKey) {
      // Another document, or this one under another passphrase's name: the names differ when
      // the keys do, so a sealed message of a key other than this one (or a plain one when
      // this one is sealed, or the reverse) is how a device with another passphrase shows.
      const kc = typeof payload.kc === 'string' ? payload.kc : undefined;
      const refusal = keyRefusal(this.key?.check, kc, this.name, from);
      if (refusal !== undefined) this.report(refusal.refused, from, refusal.message);
      return;
    }
    // Named by its own name in what is reported, not by its digest.
    const assembled = this.reassembler.accept(from, { ...payload, doc: this.name });
    if (assembled.kind === 'partial') return;
    if (assembled.kind === 'refused') {
      this.report(assembled.refused, from, assembled.message);
      return;
    }
    this.inbound = this.inbound.then(async () => {
      const opened = await unseal(this.key, this.name, from, assembled);
      if ('refused' in opened) this.report(opened.refused, from, opened.message);
      else if (!this.destroyed) {
        this.apply(from, message.to === 'broadcast', opened.body, message.role === 'viewer');
      }
    });
  }

  /**
   * Applies one message. A broadcast step 1 opens a device's session: it gets step 2 and this
   * device's step 1 (so it learns what this device has); a step 1 sent to this device alone is
   * such an answer and gets only step 2, which ends the exchange.
   */
  private apply(from: string, broadcast: boolean, body: Uint8Array, viewer: boolean): void {
    try {
      const applied = applyMessage(body, {
        doc: this.doc,
        awareness: this.awareness,
        origin: this,
        from,
        viewer,
      });
      if (applied.kind === 'step1') {
        // a viewer's step 2 would carry its local edits
        if (!this.connection.readOnly) this.send(from, applied.reply);
        if (broadcast) this.send(from, step1Message(this.doc));
      } else if (applied.kind === 'step2') {
        this.peerAnswered = true;
        this.checkSynced();
      }
    } catch (err: unknown) {
      this.report(
        'invalid_payload',
        from,
        `a message from device ${from} could not be applied (${err instanceof Error ? err.message : String(err)}); it was dropped`,
      );
    }
  }

  private send(to: string, body: Uint8Array): void {
    this.outbox.send(to, body);
  }

  private setSynced(synced: boolean): void {
    if (this.isSynced === synced || this.destroyed) return;
    this.isSynced = synced;
    this.emit('synced', synced);
  }

  private report(code: SyncErrorCode, device: string, message: string): void {
    const key = `${code} ${device}`;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.emit('error', new SyncError(code, message));
  }
}

/**
 * A provider for `options.doc` on `options.connection` (connected or not: it starts at the
 * next `joined`). With `passphrase`, derives the key first (PBKDF2, a fraction of a second);
 * rejects with `invalid_passphrase` for an empty one.
 */
export async function createYjsProvider(options: YjsProviderOptions): Promise<YjsProvider> {
  const key =
    options.passphrase === undefined
      ? undefined
      : await deriveE2EKey(options.passphrase, options.connection.room, options.iterations);
  return new YjsProvider(options, key);
}
