import { fromBase64 } from './base64.ts';
import { keyRefusal, type Refusal, type YjsPayload } from './yjs-wire.ts';

/** Most pieces one message may have (a 1 GiB message at the smallest frame that makes sense). */
const maxPieces = 1_000_000;

/** What `Reassembler.accept` made of one payload. */
export type Assembled =
  | { kind: 'whole'; bytes: Uint8Array<ArrayBuffer>; check: string | undefined }
  | { kind: 'partial' }
  | ({ kind: 'refused' } & Refusal);

export interface ReassemblerOptions {
  /** The receiving device's key check value (`E2EKey.check`); undefined when not encrypted. */
  check: string | undefined;
  /**
   * Largest message, in bytes, as its first piece declares it: `n` times that piece's length.
   * A message declared larger is refused (`invalid_payload`) before anything of it is kept.
   */
  maxMessageBytes: number;
  /**
   * Bound of the bytes held in unfinished messages of every sender together; past it the
   * largest unfinished message is dropped (and `onDrop` told) until the rest fits.
   */
  maxHeldBytes: number;
  /** An unfinished message of device `from` dropped to stay within `maxHeldBytes`. */
  onDrop: (from: string, refusal: Refusal) => void;
}

/** One sender's message in progress: `n` pieces of at most `pieceBytes` each. */
interface Unfinished {
  id: string;
  n: number;
  pieceBytes: number;
  parts: Uint8Array<ArrayBuffer>[];
  bytes: number;
}

/**
 * Puts pieces back together, one message in progress per sender: a piece of another message
 * (after pieces were lost to a relay buffer that overflowed) drops the unfinished one. Every
 * piece is checked before it is kept: its key check value against this device's (so a device
 * with another passphrase costs nothing but the refusal), its length against the first piece's,
 * and the first piece's declared size against `maxMessageBytes`.
 */
export class Reassembler {
  private readonly inProgress = new Map<string, Unfinished>();
  private held = 0;

  constructor(private readonly options: ReassemblerOptions) {}

  /** Bytes of the pieces kept in unfinished messages, of every sender. */
  get heldBytes(): number {
    return this.held;
  }

  accept(from: string, payload: YjsPayload): Assembled {
    if (payload.kc !== undefined && typeof payload.kc !== 'string') {
      return this.invalid(from, 'its key check is not a string');
    }
    const check = payload.kc;
    const refusal = keyRefusal(this.options.check, check, payload.doc, from);
    if (refusal !== undefined) {
      this.forget(from);
      return { kind: 'refused', ...refusal };
    }
    const bytes = fromBase64(payload.d);
    if (bytes === undefined) return this.invalid(from, 'its data is not base64');
    if (payload.m === undefined) return { kind: 'whole', bytes, check };
    const { m: id, i, n } = payload;
    if (
      typeof id !== 'string' ||
      typeof i !== 'number' ||
      typeof n !== 'number' ||
      !Number.isInteger(i) ||
      !Number.isInteger(n) ||
      n < 2 ||
      n > maxPieces ||
      i < 0 ||
      i >= n
    ) {
      return this.invalid(from, 'its piece numbers are wrong');
    }
    // A sender only cuts a message that does not fit one payload: no piece of it is empty.
    if (bytes.length === 0) return this.invalid(from, `its piece ${i} is empty`);
    let current = this.inProgress.get(from);
    if (current?.id !== id || current.parts.length !== i) {
      this.forget(from);
      if (i !== 0) return { kind: 'partial' }; // the start was lost: wait for the next message
      const { maxMessageBytes } = this.options;
      if (n * bytes.length > maxMessageBytes) {
        return this.invalid(
          from,
          `it declares ${n} pieces of ${bytes.length} bytes, more than ${maxMessageBytes} bytes (maxReceiveBytes)`,
        );
      }
      current = { id, n, pieceBytes: bytes.length, parts: [], bytes: 0 };
      this.inProgress.set(from, current);
    } else if (n !== current.n) {
      return this.invalid(
        from,
        `its piece ${i} declares ${n} pieces where the first said ${current.n}`,
      );
    } else if (bytes.length > current.pieceBytes) {
      return this.invalid(from, `its piece ${i} is larger than its first`);
    }
    current.parts.push(bytes);
    current.bytes += bytes.length;
    this.held += bytes.length;
    if (current.parts.length === n) {
      this.forget(from);
      return { kind: 'whole', bytes: concat(current.parts, current.bytes), check };
    }
    this.keepWithinBound();
    return { kind: 'partial' };
  }

  /** Drops the unfinished message of device `from` (it left the room). */
  forget(from: string): void {
    const current = this.inProgress.get(from);
    if (current === undefined) return;
    this.inProgress.delete(from);
    this.held -= current.bytes;
  }

  /** Drops the unfinished messages of every sender not in `devices` (the room after a join). */
  keepOnly(devices: Iterable<string>): void {
    const present = new Set(devices);
    for (const from of [...this.inProgress.keys()]) {
      if (!present.has(from)) this.forget(from);
    }
  }

  /** Drops every unfinished message. */
  clear(): void {
    this.inProgress.clear();
    this.held = 0;
  }

  /** Refuses a payload as `invalid_payload` and drops the sender's unfinished message. */
  private invalid(from: string, reason: string): Assembled {
    this.forget(from);
    return {
      kind: 'refused',
      refused: 'invalid_payload',
      message: `a message from device ${from} was dropped: ${reason}`,
    };
  }

  private keepWithinBound(): void {
    const { maxHeldBytes, onDrop } = this.options;
    while (this.held > maxHeldBytes) {
      let largest: [string, Unfinished] | undefined;
      for (const entry of this.inProgress) {
        if (largest === undefined || entry[1].bytes > largest[1].bytes) largest = entry;
      }
      if (largest === undefined) return;
      const [from, dropped] = largest;
      this.forget(from);
      onDrop(from, {
        refused: 'receive_limit',
        message: `an unfinished message of ${dropped.bytes} bytes from device ${from} was dropped: the unfinished messages of the room held more than ${maxHeldBytes} bytes (maxReceiveBytes)`,
      });
    }
  }
}

function concat(parts: Uint8Array<ArrayBuffer>[], length: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
