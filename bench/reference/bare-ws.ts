/**
 * Reference 1: the minimal room forwarder on bare `ws`, the ceiling for a Node relay. It speaks
 * the relay's frames (join, then `{to, payload}`; routed frames `{from, to, room, payload}`)
 * and does only what forwarding needs: JSON.parse, one serialization per message shared by
 * every receiver, and the same per-turn write coalescing (cork) as the relay, so the two
 * differ only by what the relay checks. No token, room-id, schema or rate-limit checks.
 */
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { type RawData, type WebSocket, WebSocketServer } from 'ws';
import type { BenchServer } from '../protocol.ts';
import { benchCertificate, benchTls } from '../tls.ts';

interface Peer {
  socket: WebSocket;
  stream: Duplex;
  room: Map<string, Peer> | undefined;
  roomJson: string;
  device: string;
  deviceJson: string;
}

let corked: Duplex[] = [];
function uncorkAll(): void {
  const streams = corked;
  corked = [];
  for (const stream of streams) stream.uncork();
}
const textFrame = { binary: false } as const;
function sendTo(peer: Peer, data: Buffer): void {
  if (peer.stream.writableCorked === 0) {
    peer.stream.cork();
    if (corked.push(peer.stream) === 1) setImmediate(uncorkAll);
  }
  peer.socket.send(data, textFrame);
}

export async function startBareWs(): Promise<BenchServer> {
  const rooms = new Map<string, Map<string, Peer>>();
  let delivered = 0;
  // BENCH_TLS=1: node's own HTTPS server, the plain way to run ws over TLS.
  const http = benchTls
    ? createHttpsServer(await benchCertificate().then(({ cert, key }) => ({ cert, key })))
    : createServer();
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    clientTracking: false,
  });
  http.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const peer: Peer = {
        socket: ws,
        stream: socket,
        room: undefined,
        roomJson: '',
        device: '',
        deviceJson: '',
      };
      ws.on('message', (data: RawData) => {
        const frame = JSON.parse(String(data)) as {
          type?: string;
          room?: string;
          device?: string | number;
          to?: string | number;
          payload?: unknown;
        };
        if (frame.type === 'join') {
          const roomId = String(frame.room);
          let room = rooms.get(roomId);
          if (room === undefined) {
            room = new Map();
            rooms.set(roomId, room);
          }
          peer.device = String(frame.device);
          peer.deviceJson = JSON.stringify(frame.device);
          peer.roomJson = JSON.stringify(roomId);
          peer.room = room;
          room.set(peer.device, peer);
          ws.send(`{"type":"joined","room":${peer.roomJson},"device":${peer.deviceJson}}`);
          return;
        }
        const room = peer.room;
        if (room === undefined) return;
        const data1 = Buffer.from(
          `{"from":${peer.deviceJson},"to":${JSON.stringify(frame.to)},"room":${peer.roomJson},"payload":${JSON.stringify(frame.payload)}}`,
        );
        if (frame.to === 'broadcast') {
          for (const member of room.values()) {
            if (member === peer) continue;
            sendTo(member, data1);
            delivered++;
          }
          return;
        }
        const target = room.get(String(frame.to));
        if (target !== undefined) {
          sendTo(target, data1);
          delivered++;
        }
      });
      ws.on('close', () => {
        const room = peer.room;
        if (room === undefined) return;
        room.delete(peer.device);
        if (room.size === 0) rooms.delete(JSON.parse(peer.roomJson) as string);
      });
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    port: (http.address() as AddressInfo).port,
    delivered: () => delivered,
    close: async () => {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
