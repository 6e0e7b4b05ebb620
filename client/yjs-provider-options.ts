import type { Awareness } from 'y-protocols/awareness';
import type * as Y from 'yjs';
import type { SyncError } from './errors.ts';
import type { RelayConnection } from './relay-connection.ts';
import type { StoreCursor } from './yjs-store-cursor.ts';

/** The options and events of `YjsProvider` (yjs-provider.ts). */

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
  /**
   * The document's place on the host (last position applied, what the host holds), to carry
   * it from one provider to the next and between runs (`StoreCursor.progress()`). Default: a
   * new one (the first join catches up from the start).
   */
  store?: StoreCursor;
}

/** Default of `maxReceiveBytes`. */
export const defaultMaxReceiveBytes = 256 * 1_048_576;

export interface YjsProviderEvents {
  /**
   * True once caught up with the host (what it keeps of the document applied, this device's
   * own edits acknowledged); false when cut. On a host that keeps no documents (or is full):
   * once a device in the room answered this one's state, or none is there.
   */
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
