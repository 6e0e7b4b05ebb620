import type { FakeRelayConnection, SentFrame } from '../../helpers/fake-relay.ts';

/**
 * The host's chunk store as the fake relay plays it (its `onFrame`): chunks kept in a map by id,
 * answers in order, a `pong` only after the answers to every frame before its `ping` (as the
 * relay does). A test holds the answers back (`hold`), damages fetched chunks, refuses puts or
 * drops frames, and reads what the client sent.
 */
export class ChunkHostFake {
  /** Chunk data (base64, as put) by id. */
  readonly chunks = new Map<string, string>();
  /** Every chunk frame and ping the client sent, in order. */
  readonly frames: SentFrame[] = [];
  /** While true, answers (and the pongs behind them) wait for `release`. */
  hold = false;
  /** The next this many `chunk-get`s are answered with one byte changed. */
  damageGets = 0;
  /** The next this many chunk frames get no answer at all (dropped past the rate). */
  dropFrames = 0;
  /** An error code every `chunk-put` is refused with (`store_full`...). */
  refusePuts: string | undefined;
  /** The most `chunk-put`s sent and not yet answered at one moment. */
  maxPutsInFlight = 0;
  private putsInFlight = 0;
  private waiting: Array<() => void> = [];

  /** The fake relay's `onFrame`. */
  readonly onFrame = (frame: SentFrame, connection: FakeRelayConnection): void => {
    this.frames.push(frame);
    if (frame.type === 'chunk-put') {
      this.putsInFlight += 1;
      this.maxPutsInFlight = Math.max(this.maxPutsInFlight, this.putsInFlight);
    }
    if (frame.type.startsWith('chunk') && this.dropFrames > 0) {
      this.dropFrames -= 1;
      if (frame.type === 'chunk-put') this.putsInFlight -= 1;
      return;
    }
    const answer = () => {
      if (frame.type === 'chunk-put') this.putsInFlight -= 1;
      connection.send(frame.type === 'ping' ? { type: 'pong' } : this.answerOf(frame));
    };
    if (this.hold || this.waiting.length > 0) this.waiting.push(answer);
    else answer();
  };

  /** Sends `count` of the answers held back (default all), in order. */
  release(count = Number.POSITIVE_INFINITY): void {
    for (let i = 0; i < count && this.waiting.length > 0; i += 1) this.waiting.shift()!();
  }

  /** The frames of one type the client sent. */
  sent(type: string): SentFrame[] {
    return this.frames.filter((frame) => frame.type === type);
  }

  private answerOf(frame: SentFrame): Record<string, unknown> {
    const { ref, id } = frame as SentFrame & { ref: number; id: string };
    if (frame.type === 'chunk-put') {
      if (this.refusePuts !== undefined) {
        return { type: 'error', code: this.refusePuts, message: 'refused', ref, id };
      }
      this.chunks.set(id, frame.data as string);
      return { type: 'chunk-stored', ref, id };
    }
    if (frame.type === 'chunk-have') {
      const ids = (frame.ids as string[]).filter((asked) => this.chunks.has(asked));
      return { type: 'chunk-held', ref, ids };
    }
    // Its copies are intact (`damageGets` damages what it sends): it drops none.
    if (frame.type === 'chunk-bad') return { type: 'chunk-dropped', ref, ids: [] };
    const data = this.chunks.get(id);
    if (data === undefined) {
      return { type: 'error', code: 'chunk_missing', message: 'no such chunk', ref, id };
    }
    if (this.damageGets === 0) return { type: 'chunk', ref, id, data };
    this.damageGets -= 1;
    const bytes = Buffer.from(data, 'base64');
    bytes[bytes.length >> 1]! ^= 0x01;
    return { type: 'chunk', ref, id, data: bytes.toString('base64') };
  }
}
