import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import { type Awareness, applyAwarenessUpdate, encodeAwarenessUpdate } from 'y-protocols/awareness';
import * as sync from 'y-protocols/sync';
import * as Y from 'yjs';

/** The first varUint of every provider message, as in y-websocket. */
const messageSync = 0;
const messageAwareness = 1;

/** The origin of awareness changes that came from another device. */
export class RemoteOrigin {
  constructor(readonly device: string) {}
}

/** A sync message carrying one document update. */
export function updateMessage(update: Uint8Array): Uint8Array {
  const encoder = encoding.createEncoder();
  encoding.writeVarUint(encoder, messageSync);
  sync.writeUpdate(encoder, update);
  return encoding.toUint8Array(encoder);
}

/** Sync step 1: the document's state vector. */
export function step1Message(doc: Y.Doc): Uint8Array {
  const encoder = encoding.createEncoder();
  encoding.writeVarUint(encoder, messageSync);
  sync.writeSyncStep1(encoder, doc);
  return encoding.toUint8Array(encoder);
}

/** The awareness states of `clients`. */
export function awarenessMessage(awareness: Awareness, clients: number[]): Uint8Array {
  const encoder = encoding.createEncoder();
  encoding.writeVarUint(encoder, messageAwareness);
  encoding.writeVarUint8Array(encoder, encodeAwarenessUpdate(awareness, clients));
  return encoding.toUint8Array(encoder);
}

/** What applying one message was: step 1 comes with the step 2 that answers it. */
export type Applied =
  | { kind: 'awareness' }
  | { kind: 'step1'; reply: Uint8Array }
  | { kind: 'step2' }
  | { kind: 'update' }
  /** A document update (step 2 or update) from a viewer's device: not applied. */
  | { kind: 'ignored' };

/**
 * Applies one message from device `from` to the document (in a transaction of `origin`) or to
 * the awareness; from a viewer's device (`viewer`), document updates are ignored. Throws on a
 * message that cannot be read.
 */
export function applyMessage(
  body: Uint8Array,
  target: { doc: Y.Doc; awareness: Awareness; origin: unknown; from: string; viewer?: boolean },
): Applied {
  const decoder = decoding.createDecoder(body);
  const type = decoding.readVarUint(decoder);
  if (target.viewer === true && type === messageSync) {
    // a viewer's device may ask (step 1) but what it writes is not taken
    const peek = decoding.createDecoder(body);
    decoding.readVarUint(peek);
    if (decoding.readVarUint(peek) !== sync.messageYjsSyncStep1) return { kind: 'ignored' };
  }
  if (type === messageAwareness) {
    applyAwarenessUpdate(
      target.awareness,
      decoding.readVarUint8Array(decoder),
      new RemoteOrigin(target.from),
    );
    return { kind: 'awareness' };
  }
  if (type !== messageSync) throw new Error(`unknown message type ${type}`);
  const reply = encoding.createEncoder();
  encoding.writeVarUint(reply, messageSync);
  const syncType = sync.readSyncMessage(decoder, reply, target.doc, target.origin, (err: Error) => {
    throw err;
  });
  if (syncType === sync.messageYjsSyncStep1)
    return { kind: 'step1', reply: encoding.toUint8Array(reply) };
  return syncType === sync.messageYjsSyncStep2 ? { kind: 'step2' } : { kind: 'update' };
}

/**
 * `updates` merged into updates of at most `maxBytes` each (one larger alone), in order: a burst
 * of many edits (a first sync of a large folder) is not merged into one update of its whole size.
 */
export function mergedInGroups(updates: Uint8Array[], maxBytes = 4_194_304): Uint8Array[] {
  const merged: Uint8Array[] = [];
  let group: Uint8Array[] = [];
  let bytes = 0;
  const close = () => {
    if (group.length > 0) merged.push(group.length === 1 ? group[0]! : Y.mergeUpdates(group));
    group = [];
    bytes = 0;
  };
  for (const update of updates) {
    if (bytes > 0 && bytes + update.length > maxBytes) close();
    group.push(update);
    bytes += update.length;
  }
  close();
  return merged;
}
