import type { E2EKey } from './e2e-key.ts';
import { SyncError } from './errors.ts';
import type { RelayConnection } from './relay-connection.ts';
import { encodePayloads, pieceBytes } from './yjs-wire.ts';

/** Unconfirmed messages on the connection past which the outbox waits before sending more. */
const maxUnconfirmed = 200;

/**
 * The provider's sending side: seals, cuts in pieces that fit a relay frame and sends, in
 * order, waiting for the relay when many messages are unconfirmed.
 */
export class YjsOutbox {
  private readonly chunkBytes: number;
  private readonly sessionId = Math.random().toString(36).slice(2, 10);
  private messageCount = 0;
  private outbound: Promise<void> = Promise.resolve();

  /** Throws `invalid_options` when `maxMessageBytes` leaves no room for data. */
  constructor(
    private readonly connection: RelayConnection,
    private readonly options: {
      doc: string;
      key: E2EKey | undefined;
      maxMessageBytes: number;
      /** A send that failed (other than on a closed connection). */
      onError: (error: SyncError) => void;
    },
  ) {
    this.chunkBytes = pieceBytes(options.maxMessageBytes, options.doc);
    if (this.chunkBytes < 3) {
      throw new SyncError(
        'invalid_options',
        `maxMessageBytes ${options.maxMessageBytes} leaves no room for data in a relay frame`,
      );
    }
  }

  /** Queues one message for `to` (a device or `broadcast`). */
  send(to: string, body: Uint8Array): void {
    this.messageCount += 1;
    const id = `${this.sessionId}.${this.messageCount}`;
    this.outbound = this.outbound.then(async () => {
      try {
        const payloads = await encodePayloads(body, {
          doc: this.options.doc,
          key: this.options.key,
          chunkBytes: this.chunkBytes,
          id,
        });
        // A whole message goes without the exactly-once envelope: Yjs updates, sync steps and
        // awareness states do no harm twice. Pieces keep it: a piece delivered twice would
        // break its message apart.
        const once = payloads.length > 1;
        for (const payload of payloads) {
          if (this.connection.queued >= maxUnconfirmed) await this.connection.flush();
          this.connection.send(to, payload, { once });
        }
      } catch (err: unknown) {
        // After close() nothing more can be sent, and nothing needs to be.
        if (err instanceof SyncError && err.code === 'closed') return;
        const error = err instanceof SyncError ? err : new SyncError('send_failed', String(err));
        this.options.onError(error);
      }
    });
  }

  /** Resolves once every message queued so far has reached the relay. */
  async flush(): Promise<void> {
    await this.outbound;
    await this.connection.flush();
  }
}
