import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { RelayConfig } from '../config/relay-config.ts';
import type { Logger } from '../log.ts';
import { openMessageBuffer } from './buffer.ts';
import { GoingAway } from './close-codes.ts';
import { closeWith, RelaySocket } from './connection.ts';
import { createHub } from './hub.ts';
import { createMetrics, type RelayMetrics, renderMetrics } from './metrics.ts';
import { Room } from './room.ts';
import { createSocketHandler } from './server.ts';
import { createShards, defaultShardCount } from './shards.ts';
import { createStatusServer } from './status.ts';

/** Timings the protocol fixes; tests shorten them. */
export interface RelayTuning {
  /** A connection must join within this time or is closed with 4008. Default 10 s. */
  joinTimeoutMs: number;
  /** Server ping period; a connection that did not answer the previous ping is closed. Default 30 s. */
  pingIntervalMs: number;
  /** Period of the sweep that drops expired buffered messages. Default 10 s. */
  purgeIntervalMs: number;
  /** In-process room slots (djb2(roomId) modulo this). Default 16. */
  shardCount: number;
  /** A receiver with more unsent bytes than this is closed with 1013 (and buffered for). Default 64 MiB. */
  maxBufferedBytes: number;
  /** close() waits this long for clients to acknowledge 1001 before cutting them. Default 2 s. */
  closeTimeoutMs: number;
  /** How long an expired device is remembered so that its next join reports `gap`. Default 24 h. */
  expiredRetentionMs: number;
}

export const defaultTuning: RelayTuning = {
  joinTimeoutMs: 10_000,
  pingIntervalMs: 30_000,
  purgeIntervalMs: 10_000,
  shardCount: defaultShardCount,
  maxBufferedBytes: 64 * 1024 * 1024,
  closeTimeoutMs: 2_000,
  expiredRetentionMs: 24 * 60 * 60 * 1000,
};

export interface RelayOptions {
  config: RelayConfig;
  /** Effective shared secret; '' disables token and room-id validation (warn loudly at start). */
  secret: string;
  logger: Logger;
  /** Injectable clock (ms) for the buffer window; default Date.now. */
  now?: () => number;
  /** Protocol timings; only tests change them. */
  tuning?: Partial<RelayTuning>;
}

export interface RelayStatus {
  rooms: number;
  connections: number;
  buffered: number;
  perRoom: Array<{ room: string; connections: number; devices: string[] }>;
}

export interface Relay {
  /** Starts the WebSocket port and the status port (port 0 = ephemeral); resolves with the real ports. */
  listen(): Promise<{ wsPort: number; statusPort: number }>;
  /** Graceful: stop accepting, close sockets with 1001, flush the buffer, close SQLite. */
  close(): Promise<void>;
  /** Co-hosted revocation: close every connection of this device id with 4003 at once. */
  revokeDevice(deviceId: number): void;
  status(): RelayStatus;
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
 * The relay of contract section 6. Opens the buffer database at once (throws when it cannot);
 * devices that were absent, or present when a previous run was killed, are buffered for again.
 */
export function createRelay(options: RelayOptions): Relay {
  const { config, secret, logger } = options;
  const now = options.now ?? Date.now;
  const tuning: RelayTuning = { ...defaultTuning, ...options.tuning };
  const metrics = createMetrics();
  const shards = createShards<Room>(tuning.shardCount);
  const buffer = openMessageBuffer(
    config.sqlitePath,
    {
      windowMs: config.bufferSeconds * 1000,
      maxMessages: config.bufferMaxMessages,
      maxBytes: config.bufferMaxBytes,
      expiredRetentionMs: tuning.expiredRetentionMs,
    },
    {
      droppedExpired: (count) => {
        metrics.bufferDroppedExpired += count;
      },
      droppedCap: (count) => {
        metrics.bufferDroppedCap += count;
      },
      flushed: () => {
        metrics.bufferFlushes++;
      },
      failed: (err, lost) => {
        logger.error({ err, lost }, 'buffer write failed; these buffered messages are lost');
      },
    },
  );
  for (const entry of buffer.restore(now())) {
    shards
      .getOrCreate(entry.room, (slot) => new Room(entry.room, slot))
      .absent.set(entry.device, entry);
  }
  const revoked = buffer.revoked();

  if (secret === '') {
    logger.warn(
      'RELAY AUTHENTICATION IS OFF: auth.secret is empty, so tokens and room ids are not checked ' +
        'and anyone can join any room as any device. Development only: set auth.secret.',
    );
  }

  const hub = createHub({
    shards,
    buffer,
    metrics,
    logger,
    now,
    roomMaxDevices: config.roomMaxDevices,
    bufferWindowMs: config.bufferSeconds * 1000,
    maxBufferedBytes: tuning.maxBufferedBytes,
  });
  const sockets = createSocketHandler({
    hub,
    metrics,
    logger,
    check: { secret, signature: config.tokenSignature, revoked },
    ratePerSecond: config.ratePerSecond,
    rateBurst: config.rateBurst,
    joinTimeoutMs: tuning.joinTimeoutMs,
    maxBufferedBytes: tuning.maxBufferedBytes,
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: config.messageMaxBytes,
    perMessageDeflate: false,
    clientTracking: false,
    WebSocket: RelaySocket,
  });
  const wsServer = createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain; charset=utf-8', upgrade: 'websocket' });
    res.end('This is the sync-host relay: connect with a WebSocket client.\n');
  });
  let closing = false;
  wsServer.on('upgrade', (req, socket, head) => {
    if (closing) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => sockets.accept(ws, socket));
  });

  function activeRooms(): number {
    let count = 0;
    for (const room of shards.rooms()) if (room.members.size > 0) count++;
    return count;
  }

  function absentDevices(): number {
    let count = 0;
    for (const room of shards.rooms()) count += room.absent.size;
    return count;
  }

  const statusServer = createStatusServer({
    healthy: () => buffer.healthy(),
    rooms: activeRooms,
    connections: () => sockets.connections.size,
    metrics: () =>
      renderMetrics(metrics, {
        connections: sockets.connections.size,
        rooms: activeRooms(),
        bufferedStored: buffer.stored,
        bufferedPending: buffer.pending,
        absentDevices: absentDevices(),
      }),
  });

  const timers: NodeJS.Timeout[] = [];
  let closed: Promise<void> | undefined;

  async function shutdown(): Promise<void> {
    closing = true;
    for (const timer of timers) clearInterval(timer);
    const stopAccepting = closeServer(wsServer);
    hub.dropAll();
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
    buffer.close();
    await closeServer(statusServer);
    logger.info('relay closed');
  }

  return {
    metrics,

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
      const slices = Math.max(1, Math.floor(tuning.pingIntervalMs / 1000));
      let slice = 0;
      timers.push(
        setInterval(() => {
          sockets.heartbeat(slice, slices);
          slice = (slice + 1) % slices;
        }, tuning.pingIntervalMs / slices).unref(),
        setInterval(() => {
          hub.sweep();
          try {
            buffer.purge(now());
          } catch (err: unknown) {
            logger.error({ err }, 'buffer purge failed');
          }
        }, tuning.purgeIntervalMs).unref(),
      );
      logger.info({ wsPort, statusPort, bind: config.bind }, 'relay listening');
      return { wsPort, statusPort };
    },

    close() {
      closed ??= shutdown();
      return closed;
    },

    revokeDevice(deviceId) {
      const device = String(deviceId);
      const revokedAt = Math.floor(Date.now() / 1000);
      revoked.set(device, revokedAt);
      buffer.revoke(device, revokedAt);
      hub.revoke(device);
      logger.info({ device }, 'device revoked at the relay');
    },

    status() {
      const perRoom: RelayStatus['perRoom'] = [];
      for (const room of shards.rooms()) {
        if (room.members.size === 0) continue;
        perRoom.push({
          room: room.id,
          connections: room.members.size,
          devices: [...room.members.keys()],
        });
      }
      return {
        rooms: perRoom.length,
        connections: sockets.connections.size,
        buffered: buffer.stored + buffer.pending,
        perRoom,
      };
    },
  };
}
