import { maxChunkIdsPerHave } from '../../protocol/relay-frames.ts';
import { fromBase64 } from '../base64.ts';
import { type E2EKey, open, seal } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { importChunkKey, plainChunkId, sameId, sealedChunkId } from './chunk-id.ts';
import { ChunkRequests } from './chunk-requests.ts';

/** A chunk of a file: its id and its plaintext size in bytes. */
export interface ChunkRef {
  id: string;
  size: number;
}

export interface ChunkTransferOptions {
  /** A joined connection of the project's room. */
  connection: RelayConnection;
  /** The project's E2E key: chunks are sealed and their ids keyed (absent: in the clear). */
  key?: E2EKey;
  /**
   * Plaintext bytes of the chunks being sent or fetched at once (at least one chunk always
   * goes). Default 2 MiB: measured on loopback with 100 MiB, 8 MiB is no faster either way, and
   * the fetched chunks (base64) stay under the relay's `relay.maxQueuedBytes` (4 MiB) without
   * the relay having to hold its answers back.
   */
  maxInFlightBytes?: number;
  /**
   * The host dropped these chunks as damaged (a device's `chunk-bad`, this one's included): a
   * device whose files name them puts them again. Only those under this transfer's key.
   */
  onLost?: (ids: string[]) => void;
}

/**
 * Plaintext bytes of one chunk at most: its base64 `chunk-put` frame, sealed, stays well under
 * the relay's default `message.maxBytes` (1 MiB), and the host keeps no larger chunk.
 */
export const maxChunkBytes = 262_144;
/** Times a chunk failing its check is fetched before `chunk_corrupt`. */
export const maxChunkFetches = 3;
/** Room in a `chunk-put` frame for everything but the data: type, ref, id, kc and kp. */
const frameOverheadBytes = 1024;
/** AES-GCM's nonce and tag around a sealed chunk. */
const sealOverheadBytes = 28;
const defaultMaxInFlightBytes = 2 * 1_048_576;

/** The plaintext size of a full chunk whose `chunk-put` frame fits `maxMessageBytes`. */
export function chunkBytesFor(maxMessageBytes: number): number {
  const fits = Math.floor((maxMessageBytes - frameOverheadBytes) / 4) * 3 - sealOverheadBytes;
  const bytes = Math.min(maxChunkBytes, Math.floor(fits / 1024) * 1024);
  if (bytes < 1024) {
    throw new SyncError(
      'invalid_options',
      `maxMessageBytes ${maxMessageBytes} leaves no room for a chunk (at least 2 KiB needed)`,
    );
  }
  return bytes;
}

/**
 * The chunks of files, kept by the host's store (docs/store.md): asks which it holds, puts the
 * others (sealed with the project's key when there is one) and fetches them back, checked. A
 * chunk is named by its content (see `chunk-id.ts`), so one the host holds is never sent again,
 * whichever device or file it came from. Errors are `SyncError`s: `store_full`,
 * `store_unavailable`, `chunk_missing`, `chunk_corrupt`, and `not_joined`/`closed` when the
 * connection dropped (ask again after the rejoin).
 */
export class ChunkTransfer {
  /** The plaintext size of a full chunk (the last one of a file is shorter). */
  readonly chunkBytes: number;
  readonly maxInFlightBytes: number;
  private readonly key: E2EKey | undefined;
  private readonly hmacKey: Promise<CryptoKey> | undefined;
  private readonly requests: ChunkRequests;
  private readonly stopLost: () => void;
  /** `chunk-get` asks for its answer in a binary frame (the connection's `binaryChunks`). */
  private readonly binary: { binary?: true };

  constructor(options: ChunkTransferOptions) {
    const maxInFlightBytes = options.maxInFlightBytes ?? defaultMaxInFlightBytes;
    if (!Number.isSafeInteger(maxInFlightBytes) || maxInFlightBytes < 1) {
      throw new SyncError('invalid_options', 'maxInFlightBytes must be a whole number above 0');
    }
    this.chunkBytes = chunkBytesFor(options.connection.maxMessageBytes);
    this.maxInFlightBytes = maxInFlightBytes;
    this.key = options.key;
    this.hmacKey = options.key === undefined ? undefined : importChunkKey(options.key.chunkKey);
    this.requests = new ChunkRequests(options.connection);
    this.binary = options.connection.binaryChunks ? { binary: true } : {};
    const { onLost } = options;
    const kc = this.key?.check;
    this.stopLost = options.connection.on('chunk', (frame) => {
      if (frame.type === 'chunks-lost' && frame.kc === kc) onLost?.(frame.ids);
    });
  }

  /** The id `plain` is kept under. */
  async idOf(plain: Uint8Array): Promise<string> {
    return this.hmacKey === undefined
      ? plainChunkId(plain)
      : sealedChunkId(await this.hmacKey, plain);
  }

  /** The ids among `ids` that the host holds (asked 1000 at a time); marks them used now. */
  async held(ids: string[]): Promise<Set<string>> {
    const asked = new Set(ids);
    const batches: string[][] = [];
    for (let start = 0; start < ids.length; start += maxChunkIdsPerHave) {
      batches.push(ids.slice(start, start + maxChunkIdsPerHave));
    }
    const answers = await Promise.all(
      batches.map((batch) => this.requests.send({ type: 'chunk-have', ids: batch, ...this.kc() })),
    );
    return new Set(answers.flatMap((answer) => answer.ids).filter((id) => asked.has(id)));
  }

  /**
   * Puts one chunk (`id` from `idOf(plain)`); resolves once the host has stored it. In a binary
   * frame with the connection's `binaryChunks`, else in text with base64 `data`.
   */
  async put(id: string, plain: Uint8Array): Promise<void> {
    const sent = this.key === undefined ? plain : await seal(this.key, plain);
    // text: `data` last, the host parses the rest of the frame without it (the relay's messages.ts)
    await this.requests.send({ type: 'chunk-put', id, ...this.proof(), data: sent });
  }

  /**
   * Fetches one chunk and returns its plaintext once it passed its check (hash, or tag and keyed
   * id). One that fails is fetched again, up to `maxChunkFetches` times, and never returned:
   * then it is reported to the host (`chunk-bad`), which drops its damaged copy so that a device
   * that has it puts it again, and the fetch fails with `chunk_corrupt` (ask again later).
   */
  async get(id: string): Promise<Uint8Array> {
    for (let fetch = 0; fetch < maxChunkFetches; fetch += 1) {
      const request = { type: 'chunk-get', id, ...this.kc(), ...this.binary } as const;
      const answer = await this.requests.send(request);
      const plain = await this.opened(id, answer.decoded ?? fromBase64(answer.data));
      if (plain !== undefined) return plain;
    }
    await this.reportBad([id]).catch(() => undefined); // the chunk_corrupt below says enough
    throw new SyncError(
      'chunk_corrupt',
      `chunk ${id} failed its check ${maxChunkFetches} times: the host's copy is damaged (reported: a device that has it puts it back)`,
    );
  }

  /**
   * Tells the host these chunks failed their check here; resolves with those it dropped (an
   * unencrypted chunk the host finds intact stays). A sealed one goes with the key's proof.
   */
  async reportBad(ids: string[]): Promise<string[]> {
    const answer = await this.requests.send({ type: 'chunk-bad', ids, ...this.proof() });
    return answer.ids;
  }

  /** Stops listening to the connection; what is waiting is rejected with `closed`. */
  close(): void {
    this.stopLost();
    this.requests.close();
  }

  /** The plaintext of a fetched chunk when it is the chunk `id` names, else undefined. */
  private async opened(
    id: string,
    bytes: Uint8Array<ArrayBuffer> | undefined,
  ): Promise<Uint8Array | undefined> {
    if (bytes === undefined) return undefined;
    if (this.key === undefined) return sameId(await plainChunkId(bytes), id) ? bytes : undefined;
    const plain = await open(this.key, bytes);
    if (plain === undefined) return undefined;
    return sameId(await this.idOf(plain), id) ? plain : undefined;
  }

  /** What lets the host file (or drop) a sealed chunk under the key's check value. */
  private proof(): { kc?: string; kp?: string } {
    return this.key === undefined ? {} : { kc: this.key.check, kp: this.key.proof };
  }

  private kc(): { kc?: string } {
    return this.key === undefined ? {} : { kc: this.key.check };
  }
}
