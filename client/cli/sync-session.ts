import { resolve } from 'node:path';
import type { RelayConnection } from '../relay-connection.ts';
import type { JoinedFrame } from '../relay-frames.ts';
import {
  type ConnectionSupervisor,
  defaultReconnectDelays,
  type ReconnectDelays,
  superviseConnection,
} from './connection-supervisor.ts';
import { controlSocketPath } from './control-path.ts';
import type { ControlEvent, SyncStatus } from './control-protocol.ts';
import { type ControlHandlers, serveControl } from './control-socket.ts';

/**
 * Test-only: the first reconnect delay of `sync` after its connection ended for good, in ms (the
 * longest is 12 times that). Not documented for users: the defaults are 5 s and 60 s.
 */
export const reconnectDelayVariable = 'SYNC_HOST_TEST_RECONNECT_MS';

/** The reconnect delays `sync` uses: the defaults unless the test variable is set. */
export function reconnectDelaysFrom(env: NodeJS.ProcessEnv): ReconnectDelays {
  const firstMs = Number(env[reconnectDelayVariable]);
  if (!env[reconnectDelayVariable] || !Number.isFinite(firstMs) || firstMs < 0) {
    return defaultReconnectDelays;
  }
  return { firstMs, maxMs: firstMs * 12 };
}

/** What runs around a `sync`: its supervised connection and its control socket. */
export interface SyncSession {
  /** The room's connections; bind the provider (`superviseYjsProvider`), then `start()` it. */
  readonly supervisor: ConnectionSupervisor;
  /** Adds fields to the status the control socket answers with (called at each request). */
  addStatus(fields: () => Record<string, unknown>): void;
  /** Answers `history` and `restore` on the control socket from now on. */
  serveFolder(handler: NonNullable<ControlHandlers['folder']>): void;
  /** Stops answering on the control socket (the supervisor is stopped by its user). */
  close(): Promise<void>;
}

export interface SyncSessionOptions {
  /** The credentials' folder (the socket goes in its `run/`). */
  configDir: string;
  authUrl: string;
  projectKey: string;
  /** The folder being synced. */
  folder: string;
  /** A fresh connection to the project's room as this device. */
  open: () => RelayConnection;
  /** Lines for the user (stderr): the supervisor's "connection ended; joining again". */
  onLine: (line: string) => void;
  delays?: ReconnectDelays;
}

/**
 * Claims the project's control socket (throws `AlreadyRunningError`, before anything is
 * changed, when a sync of the project runs already for these credentials) and supervises the
 * room's connections: `send`, `listen` and `status` of the same device go through them.
 */
export async function startSyncSession(options: SyncSessionOptions): Promise<SyncSession> {
  const supervisor = superviseConnection({
    open: options.open,
    onLine: options.onLine,
    delays: options.delays,
  });
  const extras: (() => Record<string, unknown>)[] = [];
  const startedAt = new Date().toISOString();
  const status = (): SyncStatus => {
    const connection = supervisor.connection;
    return {
      ...Object.assign({}, ...extras.map((fields) => fields())),
      state: supervisor.state,
      projectKey: options.projectKey,
      folder: resolve(options.folder),
      device: String(connection.device),
      devices: supervisor.devices,
      pid: process.pid,
      authUrl: options.authUrl,
      room: connection.room,
      host: supervisor.state === 'joined' ? (connection.host ?? null) : null,
      reconnects: supervisor.reconnects,
      startedAt,
    };
  };
  const handlers: ControlHandlers = controlHandlers(supervisor, status);
  const server = await serveControl(
    controlSocketPath(options.configDir, options.authUrl, options.projectKey),
    handlers,
  );
  return {
    supervisor,
    addStatus: (fields) => extras.push(fields),
    serveFolder: (handler) => {
      handlers.folder = handler;
    },
    close: () => server.close(),
  };
}

function controlHandlers(supervisor: ConnectionSupervisor, status: () => SyncStatus) {
  let lastJoined: JoinedFrame | undefined;
  supervisor.on('joined', (frame) => {
    lastJoined = frame;
  });
  return {
    send: (to, payload) => supervisor.send(to, payload),
    status,
    subscribe(listener) {
      // A listener coming while joined learns the room as a join would have told it.
      const connection = supervisor.connection;
      if (supervisor.state === 'joined' && lastJoined !== undefined) {
        listener({
          joined: {
            ...lastJoined,
            role: connection.isHost ? 'host' : 'member',
            host: connection.host ?? lastJoined.host,
            devices: connection.devices,
            buffered: 0,
            gap: false,
          },
        });
      }
      const forward = (event: ControlEvent) => listener(event);
      const stops = [
        supervisor.on('joined', (joined) => forward({ joined })),
        supervisor.on('message', (message) => forward({ message })),
        supervisor.on('presence', (presence) => forward({ presence })),
        supervisor.on('host', (host) => forward({ host })),
        supervisor.on('state', (state) => forward({ state })),
      ];
      return () => {
        for (const stop of stops) stop();
      };
    },
  } satisfies ControlHandlers;
}
