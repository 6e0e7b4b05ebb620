import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { capConnectionsPerAddress } from '../address-cap.ts';
import type { RelayConfig } from '../config/relay-config.ts';
import type { ConnectionBudget } from '../connection-budget.ts';
import { slowClientLimits } from '../http-listen.ts';
import type { Logger } from '../log.ts';
import { rawConnectionListener, serveTls, type TlsContextSource } from '../tls/secure-port.ts';
import type { Broker } from './broker.ts';
import { RelaySocket } from './connection.ts';
import { type RelayMetrics, renderMetrics } from './metrics.ts';
import type { RelayTuning } from './relay-options.ts';
import type { Rooms } from './rooms.ts';
import type { SocketHandler } from './socket-handler.ts';
import { createStatusServer } from './status.ts';
import type { UnjoinedLimit } from './unjoined.ts';

/** The relay's two ports: WebSocket (upgrades; anything else 426) and status. */

export async function listenOn(server: Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([err]) => Promise.reject(err)),
  ]);
  return (server.address() as AddressInfo).port;
}

export async function closeServer(server: Server): Promise<void> {
  if (!server.listening) return;
  const closed = once(server, 'close');
  server.close();
  server.closeAllConnections();
  await closed;
}

export interface WebSocketPortParts {
  config: RelayConfig;
  tuning: RelayTuning;
  logger: Logger;
  unjoined: UnjoinedLimit;
  sockets: SocketHandler;
  tls: TlsContextSource | undefined;
  /** True once the relay is closing: upgrades are cut. */
  closing: () => boolean;
}

/**
 * The WebSocket port: a plain request is answered 426; an upgrade from an address within its
 * unjoined allowance becomes a connection of `sockets`.
 */
export function createWebSocketPort(parts: WebSocketPortParts): {
  server: Server;
  wss: WebSocketServer;
} {
  const { config, tuning, logger, unjoined, sockets } = parts;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: config.messageMaxBytes,
    perMessageDeflate: false,
    clientTracking: false,
    WebSocket: RelaySocket,
  });
  const requestLimits = slowClientLimits(tuning.requestTimeoutMs, tuning.requestTimeoutMs);
  const server = createServer(requestLimits, (req, res) => {
    if (unjoined.isRefused(req.socket)) {
      req.socket.destroy();
      return;
    }
    res.writeHead(426, { 'content-type': 'text/plain; charset=utf-8', upgrade: 'websocket' });
    res.end('This is the sync-host relay: connect with a WebSocket client.\n');
  });
  // At accept, on the TCP socket, also when the port speaks TLS (see rawConnectionListener).
  const admitUnjoined = (socket: Socket) => {
    if (!unjoined.admit(socket)) {
      logger.debug({ address: socket.remoteAddress }, 'connection refused: too many unjoined');
    }
  };
  server.on('connection', Object.assign(admitUnjoined, { [rawConnectionListener]: true }));
  server.on('upgrade', (req, socket, head) => {
    if (parts.closing() || unjoined.isRefused(socket)) {
      socket.destroy();
      return;
    }
    if (!unjoined.admitRequest(req, socket)) {
      logger.debug({ address: req.socket.remoteAddress }, 'connection refused: too many unjoined');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => sockets.accept(ws, socket));
  });
  if (parts.tls) serveTls(server, parts.tls);
  return { server, wss };
}

export interface StatusPortParts {
  config: RelayConfig;
  tuning: RelayTuning;
  broker: Broker;
  rooms: Rooms;
  sockets: SocketHandler;
  unjoined: UnjoinedLimit;
  metrics: RelayMetrics;
  /** The process's budget of untrusted connections (the status port's are in it too). */
  budget: ConnectionBudget;
  /** The store's lines of `/metrics`. */
  storeMetrics: () => string;
}

/** The status port: `/health` and `/metrics` (status.ts), a few connections per address. */
export function createStatusPort(parts: StatusPortParts): Server {
  const { config, tuning, broker, rooms, sockets, unjoined, metrics, budget } = parts;
  const requestLimits = slowClientLimits(tuning.requestTimeoutMs, tuning.requestTimeoutMs);
  const server = createStatusServer(
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
          unjoinedEvicted: unjoined.evicted,
          budget: { size: budget.size, held: budget.held, evicted: budget.evicted },
        };
        return renderMetrics(metrics, gauges) + kept.metrics + parts.storeMetrics();
      },
      extra: () => broker.describe().health,
    },
    requestLimits,
  );
  capConnectionsPerAddress(server, tuning.statusConnectionsPerAddress, config.trustProxy, budget);
  return server;
}
