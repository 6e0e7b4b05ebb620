import type {
  ChunkBadFrame,
  ChunkGetFrame,
  ChunkHaveFrame,
  ChunkPutFrame,
} from '../../protocol/relay-frames.ts';
import { isSyncErrorCode, RelayError } from '../errors.ts';
import type { RelayConnection } from '../relay-connection.ts';
import type { ConnectionState } from '../relay-events.ts';
import type { ChunkAnswer, HostRequest, WithoutData } from '../store-frames.ts';

/** A chunk frame without its `ref` (given when it is sent); a put's `data` as bytes. */
export type ChunkRequest =
  | (Omit<ChunkPutFrame, 'ref' | 'data'> & { data: Uint8Array })
  | Omit<ChunkHaveFrame, 'ref'>
  | Omit<ChunkGetFrame, 'ref'>
  | Omit<ChunkBadFrame, 'ref'>;

/** The answer a request waits for, by the request's type. */
type AnswerOf = {
  'chunk-put': 'chunk-stored';
  'chunk-have': 'chunk-held';
  'chunk-get': 'chunk';
  'chunk-bad': 'chunk-dropped';
};
type Answer<R extends ChunkRequest> = Extract<ChunkAnswer, { type: AnswerOf[R['type']] }>;

/** Times a request the relay dropped unanswered (past its rate) is sent again. */
const maxDropResends = 3;

interface Waiter {
  request: ChunkRequest;
  drops: number;
  resolve: (answer: ChunkAnswer) => void;
  reject: (error: Error) => void;
}

/**
 * The requests of chunk frames on one connection, matched to their answers by `ref`. Every
 * request waiting when the connection leaves `joined` is rejected (`not_joined`, or `closed`
 * once it is closed for good): the relay answers on the socket a frame came on only, so the
 * caller asks again after the rejoin. The relay answers a `ping` only after every earlier chunk
 * frame, so a request still unanswered once a later `pong` came back was dropped (past the
 * relay's rate) and is sent again.
 */
export class ChunkRequests {
  private nextRef = 1;
  private readonly waiting = new Map<number, Waiter>();
  private readonly stops: Array<() => void>;

  constructor(private readonly connection: RelayConnection) {
    this.stops = [
      connection.on('chunk', (answer) => this.connectionOnChunk(answer)),
      connection.on('state', (state) => this.connectionOnState(state)),
    ];
  }

  /** Sends `request`; resolves with its answer, rejects with the relay's error as a `RelayError`. */
  send<R extends ChunkRequest>(request: R): Promise<Answer<R>> {
    return new Promise<ChunkAnswer>((resolve, reject) => {
      this.write({ request, drops: 0, resolve, reject });
    }) as Promise<Answer<R>>;
  }

  /** Stops listening to the connection and rejects what is waiting with `closed`. */
  close(): void {
    for (const stop of this.stops) stop();
    this.rejectAll(new RelayError('closed', 'the chunk transfer was closed'));
  }

  private write(waiter: Waiter): void {
    const ref = this.nextRef++;
    try {
      // `ref` before the request's members; a chunk-put's `data` goes last, apart (the host
      // parses the rest of the frame without it)
      const { type, ...members } = waiter.request;
      if ('data' in members) {
        const { data, ...head } = members;
        this.connection.sendStoreFrame({ type, ref, ...head } as WithoutData<ChunkPutFrame>, data);
      } else this.connection.sendStoreFrame({ type, ref, ...members } as HostRequest);
    } catch (err: unknown) {
      waiter.reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    this.waiting.set(ref, waiter);
    this.connection.flush().then(
      () => this.confirmed(ref),
      () => undefined, // the connection closed: connectionOnState rejected the waiter
    );
  }

  /** A `pong` came after the request: unanswered by now, it was dropped. */
  private confirmed(ref: number): void {
    const waiter = this.waiting.get(ref);
    if (waiter === undefined) return;
    this.waiting.delete(ref);
    waiter.drops += 1;
    if (waiter.drops > maxDropResends) {
      waiter.reject(
        new RelayError('rate_limited', `the relay dropped a ${waiter.request.type} frame`),
      );
    } else this.write(waiter);
  }

  private connectionOnChunk(answer: ChunkAnswer): void {
    if (answer.type === 'chunks-lost') return; // news of another device's report, no answer
    const waiter = this.waiting.get(answer.ref);
    if (waiter === undefined) return;
    this.waiting.delete(answer.ref);
    if (answer.type === 'error') {
      const code = isSyncErrorCode(answer.code) ? answer.code : 'relay_error';
      waiter.reject(new RelayError(code, answer.message || `the relay refused: ${code}`));
    } else if (answer.type !== expected[waiter.request.type]) {
      waiter.reject(
        new RelayError('invalid_frame', `a ${answer.type} answered a ${waiter.request.type}`),
      );
    } else waiter.resolve(answer);
  }

  private connectionOnState(state: ConnectionState): void {
    if (state === 'joined') return;
    this.rejectAll(
      state === 'closed'
        ? new RelayError('closed', 'the connection is closed')
        : new RelayError('not_joined', 'the connection dropped; ask again after the rejoin'),
    );
  }

  private rejectAll(error: RelayError): void {
    const waiters = [...this.waiting.values()];
    this.waiting.clear();
    for (const waiter of waiters) waiter.reject(error);
  }
}

const expected: AnswerOf = {
  'chunk-put': 'chunk-stored',
  'chunk-have': 'chunk-held',
  'chunk-get': 'chunk',
  'chunk-bad': 'chunk-dropped',
};
