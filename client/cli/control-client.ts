import { createConnection, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { isSyncErrorCode, SyncError } from '../errors.ts';
import { socketFolderReady } from './control-path.ts';
import {
  type ControlEvent,
  type ControlRequest,
  type ControlResponse,
  controlEventSchema,
  controlLine,
  controlResponseSchema,
  parseControlLine,
  type SyncStatus,
} from './control-protocol.ts';

/** How long a running sync has to answer a `status` probe. */
const probeTimeoutMs = 3_000;

/**
 * Opens the socket: `none` when there is no socket file, `stale` when one is there but nothing
 * answers (its sync was killed).
 */
async function connectTo(path: string): Promise<Socket | 'none' | 'stale'> {
  return new Promise((resolveSocket, reject) => {
    const socket = createConnection(path);
    const onError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') resolveSocket('none');
      else if (err.code === 'ECONNREFUSED') resolveSocket('stale');
      else reject(err);
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      resolveSocket(socket);
    });
  });
}

/** A connection to a running sync's control socket: request lines out, answer lines in. */
class ControlConnection {
  private readonly lines: AsyncIterator<string>;

  constructor(private readonly socket: Socket) {
    socket.on('error', () => {
      // The line reader ends; the caller reports the sync as gone.
    });
    this.lines = createInterface({ input: socket, crlfDelay: Number.POSITIVE_INFINITY })[
      Symbol.asyncIterator
    ]();
  }

  send(request: ControlRequest): void {
    this.socket.write(controlLine(request));
  }

  /** The next line, or undefined when the sync closed the socket. */
  async nextLine(): Promise<string | undefined> {
    const next = await this.lines.next();
    return next.done ? undefined : String(next.value);
  }

  async response(): Promise<ControlResponse> {
    const line = await this.nextLine();
    if (line === undefined) {
      throw new SyncError('sync_stopped', 'the running sync closed its control socket');
    }
    const parsed = parseControlLine(line, controlResponseSchema);
    if (!parsed.ok) {
      throw new SyncError('invalid_answer', `the running sync answered oddly: ${parsed.message}`);
    }
    return parsed.value;
  }

  close(): void {
    this.socket.destroy();
  }
}

async function open(path: string): Promise<ControlConnection | undefined> {
  if (!socketFolderReady(path, false)) return undefined;
  const socket = await connectTo(path);
  return typeof socket === 'string' ? undefined : new ControlConnection(socket);
}

/** `promise`, or a `timeout` SyncError saying `what` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SyncError('timeout', what)), ms);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** The error of an `{"ok":false}` answer. */
function failure(response: ControlResponse): SyncError | undefined {
  if (response.ok) return undefined;
  const { code, message } = response.error;
  // A code this client does not know comes from a newer running sync: its message says what.
  return new SyncError(isSyncErrorCode(code) ? code : 'invalid_answer', message);
}

export type ControlProbe =
  | { kind: 'none' }
  /** A socket file nobody answers on: its sync was killed. */
  | { kind: 'stale' }
  /** A sync answers; its status unless it did not give one in time. */
  | { kind: 'running'; status: SyncStatus | undefined };

/** Whether a sync answers on `path`, and its status. */
export async function probeControl(path: string): Promise<ControlProbe> {
  if (!socketFolderReady(path, false)) return { kind: 'none' };
  const socket = await connectTo(path);
  if (typeof socket === 'string') return { kind: socket };
  const connection = new ControlConnection(socket);
  try {
    connection.send({ op: 'status' });
    const response = await within(connection.response(), probeTimeoutMs, 'no status answer');
    return { kind: 'running', status: response.ok ? response.status : undefined };
  } catch (err: unknown) {
    if (!(err instanceof SyncError)) throw err;
    return { kind: 'running', status: undefined };
  } finally {
    connection.close();
  }
}

/**
 * Sends one request to the sync running on `path` and resolves with its answer (throwing the
 * error of an `{"ok":false}` one), or undefined when no sync runs there.
 */
export async function requestControl(
  path: string,
  request: Exclude<ControlRequest, { op: 'listen' }>,
  timeoutMs: number,
  what: string,
): Promise<ControlResponse | undefined> {
  const connection = await open(path);
  if (connection === undefined) return undefined;
  try {
    connection.send(request);
    const response = await within(connection.response(), timeoutMs, what);
    const error = failure(response);
    if (error !== undefined) throw error;
    return response;
  } finally {
    connection.close();
  }
}

/** A `listen` on a running sync's socket. */
export interface ControlListener {
  /** Resolves when the sync closes the socket (it stopped), or after `close()`. */
  readonly ended: Promise<void>;
  close(): void;
}

/**
 * Streams the relay events of the sync running on `path` to `onEvent`; undefined when no sync
 * runs there. Lines that are not events are skipped.
 */
export async function listenControl(
  path: string,
  onEvent: (event: ControlEvent) => void,
): Promise<ControlListener | undefined> {
  const connection = await open(path);
  if (connection === undefined) return undefined;
  try {
    connection.send({ op: 'listen' });
    const error = failure(await within(connection.response(), probeTimeoutMs, 'no answer'));
    if (error !== undefined) throw error;
  } catch (err: unknown) {
    connection.close();
    throw err;
  }
  const ended = (async () => {
    let line = await connection.nextLine();
    while (line !== undefined) {
      const parsed = parseControlLine(line, controlEventSchema);
      if (parsed.ok) onEvent(parsed.value);
      line = await connection.nextLine();
    }
  })();
  return { ended, close: () => connection.close() };
}
