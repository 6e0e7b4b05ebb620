import { Awareness, removeAwarenessStates } from 'y-protocols/awareness';
import * as Y from 'yjs';
import { deriveE2EKey, type E2EKey } from './e2e-key.ts';
import { Emitter } from './emitter.ts';
import { SyncError, type SyncErrorCode } from './errors.ts';
import type { RelayConnection } from './relay-connection.ts';
import type { JoinedFrame, PresenceFrame, RoutedMessage } from './relay-frames.ts';
import {
  applyMessage,
  awarenessMessage,
  RemoteOrigin,
  step1Message,
  updateMessage,
} from './yjs-messages.ts';
import { YjsOutbox } from './yjs-outbox.ts';
import { Reassembler } from './yjs-reassembler.ts';
import { isYjsPayload, unseal } from './yjs-wire.ts';

export interface YjsProviderOptions {
  /** The room's connection; the provider listens to it and never connects or closes it. */
  connection: RelayConnection;
  /** The document to keep in step. Default: a new `Y.Doc`. */
  doc?: Y.Doc;
  /** The document's name inside the room, so one room holds several documents. Default `default`. */
  name?: string;
  /** Cursors and presence. Default: a new `Awareness` of `doc`. */
  awareness?: Awareness;
  /**
   * Turns on end-to-end encryption: every device of the document must type the same
   * passphrase. Devices with another one (or none) are refused with an error event.
   */
  passphrase?: string;
  /** PBKDF2 rounds for the passphrase (every device must use the same). Default 600,000. */
  iterations?: number;
  /** The relay's `message.maxBytes`: larger messages go in pieces. Default 1 MiB. */
  maxMessageBytes?: number;
  /**
   * Bound, in bytes, of what the provider holds of messages still arriving in pieces: one
   * message may not declare more (it is dropped with `invalid_payload` at its first piece), and
   * the unfinished messages of every device together may not hold more (past it the largest is
   * dropped with `receive_limit`). Default 256 MiB.
   */
  maxReceiveBytes?: number;
}

/** Default of `maxReceiveBytes`. */
export const defaultMaxReceiveBytes = 256 * 1_048_576;

export interface YjsProviderEvents {
  /** True once a device in the room answered this one's state (or none is there); false when cut. */
  synced: (synced: boolean) => void;
  /** The other devices in the room, whenever that changes. */
  peers: (peers: string[]) => void;
  /**
   * A message that was dropped (`wrong_passphrase`, `decrypt_failed`, `not_encrypted`,
   * `encrypted`, `invalid_payload`, `receive_limit`) or a send that failed; the document is
   * left as it was.
   */
  error: (error: SyncError) => void;
}

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
  readonly connection: RelayConnection;
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
    this.ownsAwareness = options.awareness === undefined;
    this.awareness = options.awareness ?? new Awareness(this.doc);
    this.key = key;
    this.encrypted = key !== undefined;
    this.outbox = new YjsOutbox(this.connection, {
      doc: this.name,
      key,
      maxMessageBytes: options.maxMessageBytes ?? 1_048_576,
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
      connection.on('state', (state) => {
        if (state !== 'joined') this.setSynced(false);
      }),
    );
    if (connection.state === 'joined') this.startSession(connection.devices);
  }

  /** Whether a device in the room has answered this one's state since the last (re)join. */
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

  /** Resolves once every message handed to the connection so far has reached the relay. */
  flush(): Promise<void> {
    return this.outbox.flush();
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
    for (const stop of this.stops.splice(0)) stop();
    this.reassembler.clear();
    if (this.ownsAwareness) this.awareness.destroy();
  }

  private readonly docOnUpdate = (update: Uint8Array, origin: unknown): void => {
    if (origin === this || this.connection.state !== 'joined') return; // a rejoin resyncs
    this.send('broadcast', updateMessage(update));
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
    this.send('broadcast', step1Message(this.doc));
    if (this.awareness.getLocalState() !== null) {
      this.send('broadcast', awarenessMessage(this.awareness, [this.doc.clientID]));
    }
    this.emit('peers', this.peers);
    if (this.peers.length === 0) this.setSynced(true);
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
    if (!isYjsPayload(payload) || payload.doc !== this.name) return;
    const assembled = this.reassembler.accept(from, payload);
    if (assembled.kind === 'partial') return;
    if (assembled.kind === 'refused') {
      this.report(assembled.refused, from, assembled.message);
      return;
    }
    this.inbound = this.inbound.then(async () => {
      const opened = await unseal(this.key, this.name, from, assembled);
      if ('refused' in opened) this.report(opened.refused, from, opened.message);
      else if (!this.destroyed) this.apply(from, message.to === 'broadcast', opened.body);
    });
  }

  /**
   * Applies one message. A broadcast step 1 opens a device's session: it gets step 2 and this
   * device's step 1 (so it learns what this device has); a step 1 sent to this device alone is
   * such an answer and gets only step 2, which ends the exchange.
   */
  private apply(from: string, broadcast: boolean, body: Uint8Array): void {
    try {
      const applied = applyMessage(body, {
        doc: this.doc,
        awareness: this.awareness,
        origin: this,
        from,
      });
      if (applied.kind === 'step1') {
        this.send(from, applied.reply);
        if (broadcast) this.send(from, step1Message(this.doc));
      } else if (applied.kind === 'step2') {
        this.setSynced(true);
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
