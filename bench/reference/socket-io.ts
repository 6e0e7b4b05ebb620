/**
 * Reference 2: the same routing with Socket.IO rooms, what a Node user would pick instead of
 * writing a relay. WebSocket transport only (no polling upgrade), no compression. A client
 * emits `join` ({room, device}, acknowledged) then `m` (to, payload); receivers get `m` with
 * `{from, to, room, payload}`. Broadcast is `socket.to(room).emit`, direct a lookup by device.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server, type Socket } from 'socket.io';
import type { BenchServer } from '../protocol.ts';

interface JoinData {
  room: string;
  device: string | number;
}

export async function startSocketIo(): Promise<BenchServer> {
  const http = createServer();
  const io = new Server(http, {
    transports: ['websocket'],
    serveClient: false,
    perMessageDeflate: false,
  });
  const devices = new Map<string, Socket>();
  let delivered = 0;
  io.on('connection', (socket) => {
    let room = '';
    let device: string | number = '';
    socket.on('join', (join: JoinData, ack: (answer: { type: string }) => void) => {
      room = join.room;
      device = join.device;
      devices.set(`${room}\u0000${device}`, socket);
      void socket.join(room);
      ack({ type: 'joined' });
    });
    socket.on('m', (to: string | number, payload: unknown) => {
      const frame = { from: device, to, room, payload };
      if (to === 'broadcast') {
        socket.to(room).emit('m', frame);
        delivered += (io.sockets.adapter.rooms.get(room)?.size ?? 1) - 1;
        return;
      }
      const target = devices.get(`${room}\u0000${to}`);
      if (target !== undefined) {
        target.emit('m', frame);
        delivered++;
      }
    });
    socket.on('disconnect', () => {
      if (devices.get(`${room}\u0000${device}`) === socket)
        devices.delete(`${room}\u0000${device}`);
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    port: (http.address() as AddressInfo).port,
    delivered: () => delivered,
    close: async () => {
      await io.close();
    },
  };
}
