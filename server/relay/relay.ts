import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { GoingAway } from '../../protocol/relay-codes.ts';
import { capConnectionsPerAddress } from '../address-cap.ts';
import type { RelayConfig } from '../config/relay-config.ts';
import { slowClientLimits } from '../http-listen.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore } from '../store/document-store.ts';
import type { RoomDirectory } from '../store/room-directory.ts';
import type { TlsContextSource } from '../tls/secure-port.ts';
import { rawConnectionListener, serveTls } from '../tls/secure-port.ts';
import type { Broker } from './broker.ts';
import { RelaySocket } from './connection.ts';
import { createLocalBroker } from './local-broker.ts';
import { openLocalBuffer } from './local-buffer.ts';
import { createMetrics, type RelayMetrics, renderMetrics } from './metrics.ts';
import { closeWith } from './protocol-errors.ts';
import type { Room } from './room.ts';
import { createRooms, type RoomStatus } from './rooms.ts';
import { createShards, defaultShardCount } from './shards.ts';
import { createSocketHandler } from './socket-handler.ts';
import { createStatusServer } from './status.ts';
import { openStoreHandlers } from './store-handlers.ts';
import { createDeviceCheck, type DeviceDirectory } from './stored-device-check.ts';
import { createUnjoinedLimit } from './unjoined.ts';

/**
 * Timings the protocol fixes and internal sizes that relay.conf does not expose; only tests and
 * the bench change them.
 */
export interface RelayTuning {
  /** A connection must join within this time or is closed with 4008. Default 10 s. */
  joinTimeoutMs: number;
  /** Server ping period; a connection that did not answer the previous ping is closed. Default 30 s. */
  pingIntervalMs: number;
  /** Period of the sweep that drops expired buffered messages. Default 10 s. */
  purgeIntervalMs: number;
  /** In-process room slots (djb2(roomId) modulo this). Default 16. */
  shardCount: number;
  /** close() waits this long for clients to acknowledge 1001 before cutting them. Default 2 s. */
  closeTimeoutMs: number;
  /** How long an expired device is remembered so that its next join reports `gap`. Default 24 h. */
  expiredRetentionMs: number;
  /**
   * The upgrade request (and any request on the status port) must arrive whole within this time,
   * as on the auth port, or the connection is cut. Default 10 s.
   */
  requestTimeoutMs: number;
  /** Open connections per client address on the status port (past it: 429). Default 16. */
  statusConnectionsPerAddress: number;
  /**
   * Period of the document store's sweep: documents of deleted projects removed, compaction.
   * Default 30 s.
   */
  storeSweepIntervalMs: number;
}

const secondMs = 1_000;
const hourMs = 60 * 60 * secondMs;

export const defaultTuning: RelayTuning = {
  joinTimeoutMs: 10_000,
  pingIntervalMs: 30_000,
  purgeIntervalMs: 10_000,
  shardCount: defaultShardCount,
  closeTimeoutMs: 2_000,
  expiredRetentionMs: 24 * hourMs,
  requestTimeoutMs: 10 * secondMs,
  statusConnectionsPerAddress: 16,
  storeSweepIntervalMs: 30 * secondMs,
};

export interface RelayOptions {
  config: RelayConfig;
  /** Effective shared secret; '' disables token and room-id validation (warn loudly at start). */
  secret: string;
  logger: Logger;
  /** Injectable clock (ms) for the buffer window and revocation times; default Date.now. */
  now?: () => number;
  /** Protocol timings and internal sizes; only tests and the bench change them. */
  tuning?: Partial<RelayTuning>;
  /** Injectable timer for the heartbeat and the sweep; default `setInterval` (unref'd). */
  repeat?: Repeat;
  /**
   * The broker for what lies beyond this process (a cluster broker); default the in-process
   * one on the SQLite buffer.
   */
  broker?: Broker;
  /**
   * The auth side's record of devices (co-hosted: the auth database; on its own: the auth
   * service's relay feed). Set, a join's token must be the one stored for its device; unset,
   * signatures alone decide.
   */
  devices?: DeviceDirectory;
  /** Set, the WebSocket port speaks TLS (wss://) with this certificate. */
  tls?: TlsContextSource;
  /**
   * The document store. Default: with the in-process broker, store.db beside relay.db; with a
   * broker given (a cluster) or `null` (the bench, to measure the relay without it), none
   * (`append` and `catchup` are answered `store_unavailable`): a cluster node is given the
   * PostgreSQL store of `store.url` (`relay-switch.ts`).
   */
  store?: DocumentStore | null;
  /** Which rooms still have a project (co-hosted: the auth database); unset, none is forgotten. */
  rooms?: RoomDirectory;
}

/** The relay's periodic tasks. */
export type RepeatedTask = 'heartbeat' | 'sweep' | 'store';

/** Runs `run` every `periodMs` until the returned function is called. */
export type Repeat = (task: RepeatedTask, periodMs: number, run: () => void) => () => void;

const repeatEvery: Repeat = (_task, periodMs, run) => {
  const timer = setInterval(run, periodMs).unref();
  return () => clearInterval(timer);
};

export interface RelayStatus {
  rooms: number;
  connections: number;
  buffered: number;
  perRoom: RoomStatus[];
}

export interface Relay {
  /** Starts the WebSocket port and the status port (port 0 = ephemeral); resolves with the real ports. */
  listen(): Promise<{ wsPort: number; statusPort: number }>;
  /** Graceful: stop accepting, close sockets with 1001, flush the buffer, close SQLite. */
  close(): Promise<void>;
  /**
   * Revocation: close every connection of this device id with 4003 at once, and refuse its
   * tokens issued up to `revokedAt` (Unix seconds; default now).
   */
  revokeDevice(deviceId: number, revokedAt?: number): void;
  /**
   * The auth side may have deleted devices that this relay was not told of (its feed was reset):
   * forgets the devices looked up so far and looks the connected ones up again, revoking those
   * that are gone. Rejects when the auth side cannot answer (the caller asks again later).
   */
  recheckDevices(): Promise<void>;
  status(): RelayStatus;
  /**
   * The document store's sweep, run now (it also runs every 30 s): the documents of deleted
   * projects are removed and the store compacted. Resolves at once without a store.
   */
  sweepStore(): Promise<void>;
  /** The document store; undefined when this relay keeps no documents (a cluster node without `store.url`). */
  readonly store: DocumentStore | undefined;
  /** The counters rendered on `/metrics`, read in-process (the bench reads them with its CPU clock). */
  readonly metrics: Readonly<RelayMetrics>;
}

async function listenOn(server: Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([err]) => Promise.reject(err)),
  ]);
  return (server.address() as AddressInfo).port;
}

async function closeServer(server: Server): Promise<void> {
  if (!server.listening) return;
  const closed = once(server, 'close');
  server.close();
  server.closeAllConnections();
  await closed;
}

/**
 * The relay. Without a broker given, opens the single-node broker on the SQLite buffer at once
 * (throws when it cannot); devices that were absent, or present when a previous run was killed,
 * are buffered for again. A cluster broker keeps nothing in SQLite: no file is opened then.
 */
export function createRelay(options: RelayOptions): Relay {
  const { config, secret, logger } = options;
  const now = options.now ?? Date.now;
  const repeat = options.repeat ?? repeatEvery;
  const tuning: RelayTuning = { ...defaultTuning, ...options.tuning };
  const metrics = createMetrics();
  const broker =
    options.broker ??
    createLocalBroker({
      buffer: openLocalBuffer(config, tuning.expiredRetentionMs, metrics, logger),
      metrics,
      logger,
      now,
      bufferWindowMs: config.bufferSeconds * secondMs,
    });
  const { store: given, rooms: directory } = options;
  const handlers = openStoreHandlers(
    { config, store: given, clustered: options.broker !== undefined, rooms: directory },
    { metrics, logger, now, failed: () => void broker.close() },
  );
  const { store, sweep: sweepStore } = handlers;
  const revoked = broker.revoked();
  const devices = options.devices && createDeviceCheck(options.devices, logger);

  if (secret === '') {
    logger.warn(
      'RELAY AUTHENTICATION IS OFF: auth.secret is empty, so tokens and room ids are not checked ' +
        'and anyone can join any room as any device. Development only: set auth.secret.',
    );
  }

  const rooms = createRooms(createShards<Room>(tuning.shardCount), {
    broker,
    metrics,
    logger,
    maxDevices: config.roomMaxDevices,
  });
  const unjoined = createUnjoinedLimit(
    config.maxUnjoinedPerAddress,
    config.trustProxy,
    options.tls !== undefined,
  );
  const sockets = createSocketHandler({
    rooms,
    metrics,
    logger,
    check: { secret, signature: config.tokenSignature, revoked, devices },
    ratePerSecond: config.ratePerSecond,
    rateBurst: config.rateBurst,
    joinTimeoutMs: tuning.joinTimeoutMs,
    maxQueuedBytes: config.maxQueuedBytes,
    maxMemoryBytes: config.maxMemoryBytes,
    joined: (stream) => unjoined.joined(stream),
    settled: () => broker.settled(),
    stored: (room, device) => broker.stored(room, device),
    documents: handlers.documents,
    chunks: handlers.chunks,
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: config.messageMaxBytes,
    perMessageDeflate: false,
    clientTracking: false,
    WebSocket: RelaySocket,
  });
  const requestLimits = slowClientLimits(tuning.requestTimeoutMs, tuning.requestTimeoutMs);
  const wsServer = createServer(requestLimits, (req, res) => {
    if (unjoined.isRefused(req.socket)) {
      req.socket.destroy();
      return;
    }
    res.writeHead(426, { 'content-type': 'text/plain; charset=utf-8', upgrade: 'websocket' });
    res.end('This is the sync-host relay: connect with a WebSocket client.\n');
  });
  let closing = false;
  // At accept, on the TCP socket, also when the port speaks TLS (see rawConnectionListener).
  const admitUnjoined = (socket: Socket) => {
    if (!unjoined.admit(socket)) {
      logger.debug({ address: socket.remoteAddress }, 'connection refused: too many unjoined');
    }
  };
  wsServer.on('connection', Object.assign(admitUnjoined, { [rawConnectionListener]: true }));
  wsServer.on('upgrade', (req, socket, head) => {
    if (closing || unjoined.isRefused(socket)) {
      socket.destroy();
      return;
    }
    if (!unjoined.admitRequest(req, socket)) {
      logger.debug({ address: req.socket.remoteAddress }, 'connection refused: too many unjoined');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => sockets.accept(ws, socket));
  });
  if (options.tls) serveTls(wsServer, options.tls);

  const statusServer = createStatusServer(
    {
      healthy: () => broker.healthy(),
      rooms: () => rooms.active(),
      connections: () => sockets.connections.size,
      metrics: () => {
        const kept = broker.describe();
        const gauges = {
          connections: sockets.connections.size,
          rooms: rooms.active(),
          bufferedStored: kept.stored,
          bufferedPending: kept.pending,
          bufferBytes: kept.bytes,
          bufferFileBytes: kept.fileBytes,
          absentDevices: broker.absentDevices(),
          unsentBytes: sockets.unsentBytes(),
          unjoinedRefused: unjoined.refused,
        };
        return renderMetrics(metrics, gauges) + kept.metrics + handlers.metrics();
      },
      extra: () => broker.describe().health,
    },
    requestLimits,
  );
  capConnectionsPerAddress(statusServer, tuning.statusConnectionsPerAddress, config.trustProxy);

  const stops: Array<() => void> = [];
  let closed: Promise<void> | undefined;

  async function shutdown(): Promise<void> {
    closing = true;
    for (const stop of stops) stop();
    const stopAccepting = closeServer(wsServer);
    rooms.dropAll();
    const open = [...sockets.connections];
    const gone = Promise.all(open.map((conn) => once(conn.socket, 'close')));
    for (const conn of open) closeWith(conn, GoingAway);
    const timeout = new Promise<'timeout'>((resolve) => {
      setTimeout(resolve, tuning.closeTimeoutMs, 'timeout').unref();
    });
    if ((await Promise.race([gone, timeout])) === 'timeout') {
      for (const conn of sockets.connections) conn.socket.terminate();
      await gone;
    }
    await stopAccepting;
    wss.close();
    await broker.close();
    await sweepStore();
    await store?.close();
    await closeServer(statusServer);
    logger.info('relay closed');
  }

  return {
    metrics,
    store,
    sweepStore,

    async listen() {
      const wsPort = await listenOn(wsServer, config.wsPort, config.bind);
      let statusPort: number;
      try {
        statusPort = await listenOn(statusServer, config.statusPort, config.bind);
      } catch (err: unknown) {
        await closeServer(wsServer);
        throw err;
      }
      // The round is spread over the interval, a slice a second, so that 10,000 connections
      // are not pinged in one event-loop turn (a stall of ~0.4 s on a small machine).
      const slices = Math.max(1, Math.floor(tuning.pingIntervalMs / secondMs));
      let slice = 0;
      stops.push(
        repeat('heartbeat', tuning.pingIntervalMs / slices, () => {
          sockets.heartbeat(slice, slices);
          slice = (slice + 1) % slices;
        }),
        repeat('sweep', tuning.purgeIntervalMs, () => {
          rooms.sweep();
        }),
        repeat('store', tuning.storeSweepIntervalMs, () => {
          void sweepStore();
        }),
      );
      logger.info({ wsPort, statusPort, bind: config.bind }, 'relay listening');
      return { wsPort, statusPort };
    },

    close() {
      closed ??= shutdown();
      return closed;
    },

    revokeDevice(deviceId, revokedAt = Math.floor(now() / secondMs)) {
      const device = String(deviceId);
      devices?.forget(deviceId);
      // Told again (a relay following the feed from its start): only open connections matter.
      const known = revoked.get(device) === revokedAt;
      if (!known) {
        revoked.set(device, revokedAt);
        broker.revoke(device, revokedAt);
      }
      rooms.revoke(device);
      if (!known) logger.info({ device }, 'device revoked at the relay');
    },

    async recheckDevices() {
      if (devices === undefined) return;
      const connected = rooms.status().flatMap((room) => room.devices.map(Number));
      const gone = await devices.recheck(connected.filter(Number.isSafeInteger));
      for (const deviceId of gone) this.revokeDevice(deviceId);
    },

    status() {
      const perRoom = rooms.status();
      const kept = broker.describe();
      return {
        rooms: perRoom.length,
        connections: sockets.connections.size,
        buffered: kept.stored + kept.pending,
        perRoom,
      };
    },
  };
}
