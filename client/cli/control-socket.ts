import { chmodSync, lstatSync, mkdirSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { SyncError, type SyncErrorCode } from '../errors.ts';
import type { Target } from '../relay-events.ts';
import { probeControl } from './control-client.ts';
import { socketFolderReady } from './control-path.ts';
import {
  type ControlEvent,
  type ControlRequest,
  type ControlResponse,
  controlLine,
  controlRequestSchema,
  maxRequestBytes,
  parseControlLine,
  type SyncStatus,
} from './control-protocol.ts';
import { printable } from './printable.ts';

/**
 * A running `sync` answers on a local socket, so that `send`, `listen` and `status` of the same
 * device and project go through its relay connection instead of replacing it (the relay keeps
 * one connection per device and room). The socket is `<configDir>/run/<hash>.sock`, mode 0600 in
 * a folder of mode 0700; the protocol is in control-protocol.ts.
 */

/** Unsent event lines a `listen` client may hold before it is cut (it does not read). */
const maxUnreadBytes = 8 * 1_048_576;

/** What the control socket of a running sync does, supplied by the sync command. */
export interface ControlHandlers {
  /** Sends on the sync's connection; resolves once the relay confirmed it. */
  send(to: Target, payload: Record<string, unknown>): Promise<void>;
  /** Calls `listener` with every relay event until the returned function is called. */
  subscribe(listener: (event: ControlEvent) => void): () => void;
  /** The status `status` answers with (called at each request). */
  status(): SyncStatus;
  /** `history` and `restore` run by the sync (undefined until its folder is open). */
  folder?: (
    request: Extract<ControlRequest, { op: 'history' | 'restore' }>,
  ) => Promise<{ stdout: string; stderr: string }>;
}

/** A sync of the same project is running already: its status says which. */
export class AlreadyRunningError extends SyncError {
  constructor(readonly running: SyncStatus | undefined) {
    super(
      'already_running',
      running === undefined
        ? 'a sync of this project is already running for this device (it did not say where)'
        : `a sync of "${printable(running.projectKey)}" is already running for this device: pid ${running.pid}, folder ${printable(running.folder)}`,
    );
    this.name = 'AlreadyRunningError';
  }
}

export interface ControlServer {
  readonly path: string;
  /** Stops answering, ends the `listen` streams and removes the socket. */
  close(): Promise<void>;
}

/**
 * Starts answering on `path`. Throws `AlreadyRunningError` when a process answers there; a
 * socket file nobody answers on (left by a killed sync) is replaced.
 */
export async function serveControl(
  path: string,
  handlers: ControlHandlers,
): Promise<ControlServer> {
  socketFolderReady(path, true);
  // Half-open: a client may end its side after its request (`… | nc -U`) and still get the answer.
  const server = createServer({ allowHalfOpen: true });
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serveSocket(socket, handlers);
  });
  await withStartLock(path, () => listenOn(server, path));
  if (process.platform !== 'win32') chmodSync(path, 0o600);
  return {
    path,
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolveClose) => server.close(() => resolveClose()));
    },
  };
}

/** How long a start lock may stand before a start takes it for one left by a killed process. */
const startLockStaleMs = 10_000;

/**
 * Runs `work` (probe, replace a stale socket, listen) while holding `<path>.lock`, a folder made
 * with mkdir (atomic): two syncs starting at once over a stale socket would otherwise both see it
 * stale, and the second would remove the first one's new socket and listen in its place.
 */
async function withStartLock(path: string, work: () => Promise<void>): Promise<void> {
  if (process.platform === 'win32') return work();
  const lock = `${path}.lock`;
  for (;;) {
    try {
      mkdirSync(lock, { mode: 0o700 });
      break;
    } catch (err: unknown) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let age = 0;
    try {
      age = Date.now() - statSync(lock).mtimeMs;
    } catch {
      continue; // released meanwhile
    }
    if (age > startLockStaleMs) rmSync(lock, { recursive: true, force: true });
    else await sleep(20);
  }
  try {
    await work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Listens on `path` after making sure no one answers there; replaces a stale socket file. */
async function listenOn(server: Server, path: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const found = await probeControl(path);
    if (found.kind === 'running') throw new AlreadyRunningError(found.status);
    if (found.kind === 'stale') removeStaleSocket(path);
    try {
      await new Promise<void>((resolveListen, reject) => {
        server.once('error', reject);
        server.listen(path, () => {
          server.off('error', reject);
          resolveListen();
        });
      });
      return;
    } catch (err: unknown) {
      // Another sync started between the probe and the listen: the next probe finds it.
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt > 0) throw err;
    }
  }
}

function removeStaleSocket(path: string): void {
  if (process.platform === 'win32') return;
  if (!lstatSync(path).isSocket()) {
    throw new SyncError('unsafe_socket_folder', `${path} is not a socket; remove it`);
  }
  unlinkSync(path);
}

/** One client of the control socket: request lines in, answer (and event) lines out. */
function serveSocket(socket: Socket, handlers: ControlHandlers): void {
  let unsubscribe: (() => void) | undefined;
  const write = (value: ControlResponse | ControlEvent) => {
    if (socket.destroyed || !socket.writable) return;
    socket.write(controlLine(value));
    if (socket.writableLength > maxUnreadBytes) socket.destroy();
  };
  const refuse = (code: SyncErrorCode, message: string) =>
    write({ ok: false, error: { code, message } });
  socket.on('error', () => {
    // A client that went away: the close event cleans up.
  });
  socket.on('close', () => unsubscribe?.());
  // The client sent all it will send: end once its requests are answered (a listen goes on).
  let pending = 0;
  let inputEnded = false;
  const endWhenAnswered = () => {
    if (inputEnded && pending === 0 && unsubscribe === undefined && !socket.writableEnded) {
      socket.end();
    }
  };
  // Bytes since the last complete line (counted before readline sees them): a client that
  // never ends its line is cut.
  let received = 0;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received <= maxRequestBytes || unsubscribe !== undefined || socket.writableEnded) return;
    lines.close();
    const line = controlLine({
      ok: false,
      error: { code: 'too_big', message: `a request is limited to ${maxRequestBytes} bytes` },
    });
    socket.end(line, () => socket.destroy());
  });
  const lines = createInterface({ input: socket, crlfDelay: Number.POSITIVE_INFINITY });
  lines.on('line', (line) => {
    received = 0;
    if (line.trim() === '') return;
    const parsed = parseControlLine(line, controlRequestSchema);
    if (!parsed.ok) {
      refuse(parsed.code, parsed.message);
      return;
    }
    if (unsubscribe !== undefined) {
      refuse('invalid_request', 'this connection is listening; open another one for requests');
      return;
    }
    pending++;
    void answer(parsed.value, handlers, write, (stop) => {
      unsubscribe = stop;
    })
      .catch((err: unknown) => {
        const code = err instanceof SyncError ? err.code : 'internal';
        refuse(code, err instanceof Error ? err.message : String(err));
      })
      .finally(() => {
        pending--;
        endWhenAnswered();
      });
  });
  lines.on('close', () => {
    inputEnded = true;
    endWhenAnswered();
  });
}

/**
 * One request answered with `write`; `listen` subscribes the connection to the sync's events
 * (`listening` keeps what ends it). A request that fails throws, for its line to say why.
 */
async function answer(
  request: ControlRequest,
  handlers: ControlHandlers,
  write: (value: ControlResponse | ControlEvent) => void,
  listening: (unsubscribe: () => void) => void,
): Promise<void> {
  switch (request.op) {
    case 'status':
      write({ ok: true, status: handlers.status() });
      return;
    case 'send':
      await handlers.send(request.to, request.payload);
      write({ ok: true });
      return;
    case 'listen':
      write({ ok: true });
      listening(handlers.subscribe(write));
      return;
    case 'history':
    case 'restore': {
      if (handlers.folder === undefined) {
        throw new SyncError(
          'not_joined',
          'the running sync has not opened its folder yet; try again',
        );
      }
      write({ ok: true, output: await handlers.folder(request) });
      return;
    }
  }
}
