import { once } from 'node:events';
import type { Server } from 'node:http';
import type { WebSocketServer } from 'ws';
import { GoingAway } from '../../protocol/relay-codes.ts';
import { memberRevocationKey } from '../../protocol/room-grant.ts';
import { type ConnectionBudget, ownConnectionBudget } from '../connection-budget.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore } from '../store/document-store.ts';
import type { Broker } from './broker.ts';
import type { ChunkFrames } from './chunk-frames.ts';
import type { DocumentFrames } from './document-frames.ts';
import { createLocalBroker } from './local-broker.ts';
import { openLocalBuffer } from './local-buffer.ts';
import { createMetrics, type RelayMetrics } from './metrics.ts';
import { closeWith } from './protocol-errors.ts';
import {
  defaultTuning,
  type Relay,
  type RelayOptions,
  type RelayStatus,
  type RelayTuning,
  type Repeat,
  repeatEvery,
  secondMs,
} from './relay-options.ts';
import { closeServer, createStatusPort, createWebSocketPort, listenOn } from './relay-ports.ts';
import type { Room } from './room.ts';
import { createRooms, type Rooms } from './rooms.ts';
import { createShards } from './shards.ts';
import { createSocketHandler, type SocketHandler } from './socket-handler.ts';
import { openStoreHandlers, type StoreHandlers } from './store-handlers.ts';
import { createDeviceCheck, type DeviceCheck } from './stored-device-check.ts';
import { createUnjoinedLimit, type UnjoinedLimit } from './unjoined.ts';

export type {
  Relay,
  RelayOptions,
  RelayStatus,
  RelayTuning,
  Repeat,
  RepeatedTask,
} from './relay-options.ts';
export { defaultTuning } from './relay-options.ts';

/** The broker: the one given (a cluster's), or the in-process one on the SQLite buffer. */
function openBroker(
  options: RelayOptions,
  tuning: RelayTuning,
  metrics: RelayMetrics,
  now: () => number,
): Broker {
  const { config, logger } = options;
  return (
    options.broker ??
    createLocalBroker({
      buffer: openLocalBuffer(config, tuning.expiredRetentionMs, metrics, logger),
      metrics,
      logger,
      now,
      bufferWindowMs: config.bufferSeconds * secondMs,
    })
  );
}

function warnIfOpen(secret: string, logger: Logger): void {
  if (secret !== '') return;
  logger.warn(
    'RELAY AUTHENTICATION IS OFF: auth.secret is empty, so tokens and room ids are not checked ' +
      'and anyone can join any room as any device. Development only: set auth.secret.',
  );
}

/** What the relay's shutdown and timers act on. */
interface Running {
  tuning: RelayTuning;
  logger: Logger;
  broker: Broker;
  store: DocumentStore | undefined;
  sweepStore: (options?: { final?: boolean }) => Promise<void>;
  rooms: Rooms;
  sockets: SocketHandler;
  wsServer: Server;
  wss: WebSocketServer;
  statusServer: Server;
}

/**
 * Graceful shutdown: stop accepting, every joined device absent at once, sockets closed with
 * 1001 (cut after `closeTimeoutMs`), then the broker, the store and the status port.
 */
async function shutdown(running: Running): Promise<void> {
  const { tuning, rooms, sockets, broker, store } = running;
  const stopAccepting = closeServer(running.wsServer);
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
  running.wss.close();
  await broker.close();
  await running.sweepStore({ final: true });
  await store?.close();
  await closeServer(running.statusServer);
  running.logger.info('relay closed');
}

/** Both ports listening (port 0: ephemeral), with their real numbers. */
async function listenBoth(
  running: Running,
  config: RelayOptions['config'],
): Promise<{ wsPort: number; statusPort: number }> {
  const wsPort = await listenOn(running.wsServer, config.wsPort, config.bind);
  let statusPort: number;
  try {
    statusPort = await listenOn(running.statusServer, config.statusPort, config.bind);
  } catch (err: unknown) {
    await closeServer(running.wsServer);
    throw err;
  }
  running.logger.info({ wsPort, statusPort, bind: config.bind }, 'relay listening');
  return { wsPort, statusPort };
}

function statusOf({ rooms, broker, sockets }: Running): RelayStatus {
  const perRoom = rooms.status();
  const kept = broker.describe();
  return {
    rooms: perRoom.length,
    connections: sockets.connections.size,
    buffered: kept.stored + kept.pending,
    perRoom,
  };
}

/** The heartbeat, the sweep and the store's sweep; returns their stops. */
function startTimers(running: Running, repeat: Repeat): Array<() => void> {
  const { tuning, sockets, rooms, sweepStore } = running;
  // The round is spread over the interval, a slice a second, so that 10,000 connections
  // are not pinged in one event-loop turn (a stall of ~0.4 s on a small machine).
  const slices = Math.max(1, Math.floor(tuning.pingIntervalMs / secondMs));
  let slice = 0;
  return [
    repeat('heartbeat', tuning.pingIntervalMs / slices, () => {
      sockets.heartbeat(slice, slices);
      slice = (slice + 1) % slices;
    }),
    repeat('sweep', tuning.purgeIntervalMs, () => rooms.sweep()),
    repeat('store', tuning.storeSweepIntervalMs, () => {
      void sweepStore();
    }),
  ];
}

/** The rooms, the connections' handler, the unjoined connections' limit and the budget. */
function openConnections(
  options: RelayOptions,
  tuning: RelayTuning,
  parts: {
    broker: Broker;
    metrics: RelayMetrics;
    documents: DocumentFrames;
    chunks: ChunkFrames;
    devices: DeviceCheck | undefined;
  },
): { rooms: Rooms; unjoined: UnjoinedLimit; sockets: SocketHandler; budget: ConnectionBudget } {
  const { config, secret, logger } = options;
  const { broker, metrics, documents, chunks, devices } = parts;
  const rooms = createRooms(createShards<Room>(tuning.shardCount), {
    broker,
    metrics,
    logger,
    maxDevices: config.roomMaxDevices,
  });
  // one budget for both ports (the host gives the process's)
  const budget = options.connectionBudget ?? ownConnectionBudget();
  const unjoined = createUnjoinedLimit(
    config.maxUnjoinedPerAddress,
    config.trustProxy,
    options.tls !== undefined,
    budget,
  );
  const sockets = createSocketHandler({
    rooms,
    metrics,
    logger,
    check: {
      secret,
      signature: config.tokenSignature,
      revokedAt: (device) => broker.revokedAt(device),
      devices,
    },
    ratePerSecond: config.ratePerSecond,
    rateBurst: config.rateBurst,
    joinTimeoutMs: tuning.joinTimeoutMs,
    maxQueuedBytes: config.maxQueuedBytes,
    maxMemoryBytes: config.maxMemoryBytes,
    joined: (stream) => unjoined.joined(stream),
    settled: () => broker.settled(),
    stored: (room, device) => broker.stored(room, device),
    documents,
    chunks,
  });
  return { rooms, unjoined, sockets, budget };
}

/**
 * The relay. Without a broker given, opens the single-node broker on the SQLite buffer at once
 * (throws when it cannot); devices that were absent, or present when a previous run was killed,
 * are buffered for again. A cluster broker keeps nothing in SQLite: no file is opened then.
 */
export function createRelay(options: RelayOptions): Relay {
  const { config, secret, logger } = options;
  const now = options.now ?? Date.now;
  const tuning: RelayTuning = { ...defaultTuning, ...options.tuning };
  const metrics = createMetrics();
  const broker = openBroker(options, tuning, metrics, now);
  const handlers: StoreHandlers = openStoreHandlers(
    { config, store: options.store, clustered: options.broker !== undefined, rooms: options.rooms },
    { metrics, logger, now, failed: () => void broker.close() },
  );
  const { store, documents, chunks, sweep: sweepStore } = handlers;
  const devices = options.devices && createDeviceCheck(options.devices, logger);
  warnIfOpen(secret, logger);
  const { rooms, unjoined, sockets, budget } = openConnections(options, tuning, {
    ...{ broker, metrics, documents, chunks, devices },
  });
  let closing = false;
  const port = createWebSocketPort({
    ...{ config, tuning, logger, unjoined, sockets, tls: options.tls },
    closing: () => closing,
  });
  const statusServer = createStatusPort({
    ...{ config, tuning, broker, rooms, sockets, unjoined, metrics, budget },
    storeMetrics: handlers.metrics,
  });
  const running: Running = {
    ...{ tuning, logger, broker, store, sweepStore, rooms, sockets, statusServer },
    wsServer: port.server,
    wss: port.wss,
  };
  const stops: Array<() => void> = [];
  let closed: Promise<void> | undefined;

  return {
    metrics,
    store,
    sweepStore,

    async listen() {
      const ports = await listenBoth(running, config);
      stops.push(...startTimers(running, options.repeat ?? repeatEvery));
      return ports;
    },

    close() {
      closing = true;
      for (const stop of stops.splice(0)) stop();
      closed ??= shutdown(running);
      return closed;
    },

    revokeDevice(deviceId, revokedAt = Math.floor(now() / secondMs)) {
      const device = String(deviceId);
      devices?.forget(deviceId);
      // Told again (a relay following the feed from its start): only open connections matter.
      const known = broker.revokedAt(device) === revokedAt;
      if (!known) broker.revoke(device, revokedAt);
      rooms.revoke(device);
      if (!known) logger.info({ device }, 'device revoked at the relay');
    },

    revokeMember(roomId, userId, memberId) {
      const key = memberRevocationKey(roomId, userId);
      const known = (broker.revokedAt(key) ?? 0) >= memberId;
      if (!known) broker.revoke(key, memberId);
      rooms.revokeMember(roomId, key, memberId);
      if (!known) logger.info({ room: roomId, user: userId }, 'membership revoked at the relay');
    },

    async recheckDevices() {
      if (devices === undefined) return;
      const connected = rooms.status().flatMap((room) => room.devices.map(Number));
      const gone = await devices.recheck(connected.filter(Number.isSafeInteger));
      for (const deviceId of gone) this.revokeDevice(deviceId);
    },

    status: () => statusOf(running),
  };
}
